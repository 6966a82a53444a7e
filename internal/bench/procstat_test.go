package bench

import (
	"os"
	"testing"
)

func TestParseProcStat(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50 ticks.
	stat := []byte("4242 (my (odd) srv) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1000000 500\n")
	cpu, err := parseProcStatCPU(stat)
	if err != nil || cpu != 3.0 {
		t.Errorf("cpu = %v, %v; want 3.0", cpu, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 x y z"} {
		if _, err := parseProcStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseProcStatCPU(%q) accepted", bad)
		}
	}
	status := []byte("Name:\tsrv\nVmPeak:\t  999 kB\nVmHWM:\t   73728 kB\nVmRSS:\t   65536 kB\nThreads:\t8\n")
	rss, hwm := parseProcStatusMem(status)
	if rss != 64<<20 || hwm != 72<<20 {
		t.Errorf("rss %d hwm %d", rss, hwm)
	}
}

func TestReadProcSelf(t *testing.T) {
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Skip("no /proc:", err)
	}
	if s.PeakRSSBytes <= 0 || s.RSSBytes <= 0 || s.PeakRSSBytes < s.RSSBytes {
		t.Errorf("sample %+v", s)
	}
	if _, err := ReadProc(1 << 30); err == nil {
		t.Error("ReadProc of a missing pid succeeded")
	}
	if selfCPUSeconds() <= 0 {
		t.Error("getrusage reported no CPU")
	}
}
