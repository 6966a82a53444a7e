package devcluster

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// FreeBase returns the first base from `from` (in steps of step) whose
// ports base..base+span-1 nothing listens on. Callers start below the
// kernel's ephemeral range (32768+) so that outgoing connections rarely
// take their ports.
//
// Probing alone races: two test packages that run at once (go test ./...
// runs packages in parallel) can both find the same block free before
// either listens. So the block is also reserved for the life of this
// process by an exclusive flock on a file named after it in the temp
// directory for each of its ports; other processes skip blocks with a
// port they cannot lock (blocks of different callers may overlap), and
// the locks go when the process exits (even after kill -9).
func FreeBase(from, span, step int) (int, error) {
	if span < 1 || step < span {
		return 0, fmt.Errorf("devcluster: port block of %d ports in steps of %d", span, step)
	}
	for base := from; base+span <= 65000; base += step {
		if !portsFree(base, span) || !reserve(base, span) {
			continue
		}
		if portsFree(base, span) { // taken between the probe and the lock?
			return base, nil
		}
	}
	return 0, fmt.Errorf("devcluster: no free block of %d ports from %d", span, from)
}

func portsFree(base, span int) bool {
	for p := base; p < base+span; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

var (
	reservedMu sync.Mutex
	reserved   = map[int]*os.File{} // port → lock file, kept open: closing would drop the lock
)

// reserve takes the process-lifetime locks of every port of the block at
// base, or none of them.
func reserve(base, span int) bool {
	reservedMu.Lock()
	defer reservedMu.Unlock()
	dir := filepath.Join(os.TempDir(), "terrace-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true // no lock directory: fall back to probing alone
	}
	var taken []*os.File
	release := func() {
		for _, f := range taken {
			f.Close() // drops the lock
		}
	}
	for p := base; p < base+span; p++ {
		if _, ok := reserved[p]; ok {
			release()
			return false // this process already handed it out
		}
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(p)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			release()
			return true
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			release()
			return false
		}
		taken = append(taken, f)
	}
	for i, f := range taken {
		reserved[base+i] = f
	}
	return true
}
