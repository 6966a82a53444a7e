package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcSample is a reading of a process's resource use.
type ProcSample struct {
	// CPUSeconds is user + system time since the process started.
	CPUSeconds float64
	// RSSBytes is the resident set now (VmRSS).
	RSSBytes int64
	// PeakRSSBytes is the high-water mark of the resident set since the
	// process started (VmHWM).
	PeakRSSBytes int64
}

// procClockTicks is USER_HZ, the unit of the times in /proc/PID/stat. The
// kernel fixes it at 100 for the /proc ABI on every architecture, whatever
// CONFIG_HZ is.
const procClockTicks = 100

// ReadProc samples a local process from /proc (Linux).
func ReadProc(pid int) (ProcSample, error) {
	var s ProcSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("bench: server pid %d: %w", pid, err)
	}
	cpu, err := parseProcStatCPU(stat)
	if err != nil {
		return s, fmt.Errorf("bench: server pid %d: %w", pid, err)
	}
	s.CPUSeconds = cpu
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("bench: server pid %d: %w", pid, err)
	}
	s.RSSBytes, s.PeakRSSBytes = parseProcStatusMem(status)
	return s, nil
}

// readProcs sums the CPU and memory of several processes (the nodes of a
// local cluster); peak RSS is the sum of the peaks, an upper bound.
func readProcs(pids []int) (ProcSample, error) {
	var sum ProcSample
	for _, pid := range pids {
		s, err := ReadProc(pid)
		if err != nil {
			return sum, err
		}
		sum.CPUSeconds += s.CPUSeconds
		sum.RSSBytes += s.RSSBytes
		sum.PeakRSSBytes += s.PeakRSSBytes
	}
	return sum, nil
}

// parseProcStatCPU returns utime+stime in seconds from /proc/PID/stat. The
// command name (field 2) may contain spaces and parentheses, so fields are
// counted from the last ')'.
func parseProcStatCPU(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: malformed /proc stat")
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: short /proc stat (%d fields)", len(f)+2)
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: malformed cpu times in /proc stat")
	}
	return float64(ut+st) / procClockTicks, nil
}

// parseProcStatusMem returns VmRSS and VmHWM in bytes from /proc/PID/status
// (0 when absent, as for a zombie).
func parseProcStatusMem(status []byte) (rss, hwm int64) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *int64
		switch k {
		case "VmRSS":
			dst = &rss
		case "VmHWM":
			dst = &hwm
		default:
			continue
		}
		f := strings.Fields(v)
		if len(f) >= 1 {
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err == nil {
				*dst = n * 1024 // the kernel prints kB meaning KiB
			}
		}
	}
	return rss, hwm
}

// selfCPUSeconds is this process's user + system CPU time (getrusage).
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
