package device

import (
	"errors"
	"testing"
)

// A healthy device passes the check and keeps no trace of it; an injected
// read EIO (a disk dying under data nobody reads) fails the check and the
// device, as a client read would; a full device is not failed.
func TestCheckFindsDeadDevice(t *testing.T) {
	d, _ := openDir(t, 1<<20)
	f, err := d.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(100, 'x'), 0)
	if err := d.Check(); err != nil || d.Failed() {
		t.Fatalf("healthy device: check %v, failed %v", err, d.Failed())
	}
	if d.Used() != 100 {
		t.Fatalf("used %d after a check, want 100 (the scratch file is removed)", d.Used())
	}
	if err := d.InjectFault(Fault{Full: true}); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); err != nil || d.Failed() {
		t.Fatalf("full device: check %v, failed %v; full is not failed", err, d.Failed())
	}
	if err := d.InjectFault(Fault{ReadErr: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Check(); !errors.Is(err, ErrFailed) || !d.Failed() {
		t.Fatalf("read EIO: check %v, failed %v; want the device failed", err, d.Failed())
	}
	if err := d.Check(); !errors.Is(err, ErrFailed) {
		t.Fatalf("check of a failed device: %v", err)
	}
}
