package device

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// syncfs flushes the filesystem holding f.
func syncfs(f *os.File) error {
	for {
		err := unix.Syncfs(int(f.Fd()))
		if err != unix.EINTR {
			return err
		}
	}
}

// syncfsSupported: syncfs reports writeback errors only since Linux 5.8;
// before, a failed flush looked like success, which would acknowledge
// writes that are not durable.
func syncfsSupported() error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return err
	}
	rel := unix.ByteSliceToString(u.Release[:])
	major, minor, ok := kernelVersion(rel)
	if !ok {
		return fmt.Errorf("cannot read the kernel version %q", rel)
	}
	if major < 5 || major == 5 && minor < 8 {
		return fmt.Errorf("kernel %s: syncfs reports write errors only since 5.8", rel)
	}
	return nil
}

// isMountPoint reports whether dir is the root of a filesystem: its
// parent is on another device, or (a bind mount of the same device) the
// mount table lists it.
func isMountPoint(dir string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	var st, parent unix.Stat_t
	if unix.Stat(abs, &st) != nil || unix.Stat(filepath.Dir(abs), &parent) != nil {
		return false
	}
	if st.Dev != parent.Dev {
		return true
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mount-point ...
		if f := strings.Fields(line); len(f) > 4 && f[4] == abs {
			return true
		}
	}
	return false
}

// kernelVersion parses "6.18.44-fc-v657" into 6, 18.
func kernelVersion(rel string) (major, minor int, ok bool) {
	parts := strings.SplitN(rel, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	end := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if end < 0 {
		end = len(parts[1])
	}
	minor, err2 := strconv.Atoi(parts[1][:end])
	return major, minor, err1 == nil && err2 == nil
}
