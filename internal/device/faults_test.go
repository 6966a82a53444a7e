package device

import (
	"errors"
	"testing"
	"time"
)

// TestInjectedFullWritesNothing: an injected ENOSPC is ErrFull, leaves the
// file and the used counter as they were, does not fail the device, and
// stops when cleared.
func TestInjectedFullWritesNothing(t *testing.T) {
	d, _ := openDir(t, 1<<20)
	f, err := d.Create("a")
	if err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(100, 'x'), 0)
	if err := d.InjectFault(Fault{Full: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytesOf(10, 'y'), 100); !errors.Is(err, ErrFull) {
		t.Fatalf("write on an injected-full device: %v, want ErrFull", err)
	}
	if f.Size() != 100 || d.Used() != 100 {
		t.Fatalf("after refused write: size %d used %d, want 100 and 100", f.Size(), d.Used())
	}
	// Overwriting in place does not grow the file: allowed, as on a full
	// filesystem.
	write(t, f, bytesOf(10, 'z'), 0)
	if d.Failed() {
		t.Fatal("ENOSPC failed the device")
	}
	if err := d.InjectFault(Fault{}); err != nil {
		t.Fatal(err)
	}
	write(t, f, bytesOf(10, 'y'), 100)
	if f.Size() != 110 || d.Used() != 110 {
		t.Fatalf("after clearing: size %d used %d", f.Size(), d.Used())
	}
}

// TestInjectedEIOFailsDevice: an injected read or write EIO marks the
// device failed like a real one, and clearing the fault does not bring it
// back (only a restart does).
func TestInjectedEIOFailsDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault Fault
		op    func(f File) error
	}{
		{"read", Fault{ReadErr: 1}, func(f File) error { _, err := f.ReadAt(make([]byte, 4), 0); return err }},
		{"write", Fault{WriteErr: 1}, func(f File) error { _, err := f.WriteAt([]byte("abcd"), 4); return err }},
		{"sync", Fault{WriteErr: 1}, func(f File) error { return f.Sync() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _ := openDir(t, 1<<20)
			f, _ := d.Create("a")
			write(t, f, []byte("abcd"), 0)
			if err := d.InjectFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			if err := tc.op(f); !errors.Is(err, ErrFailed) {
				t.Fatalf("%s with injected EIO: %v, want ErrFailed", tc.name, err)
			}
			if !d.Failed() {
				t.Fatal("device not failed after EIO")
			}
			d.InjectFault(Fault{})
			if _, err := f.ReadAt(make([]byte, 4), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("read after clearing the fault: %v, want ErrFailed (stays failed)", err)
			}
			// fsyncgate: after a failed writeback the kernel marks the
			// pages clean, so a later fsync would succeed for writes it
			// never made durable. A sync on a failed device fails.
			if err := f.Sync(); !errors.Is(err, ErrFailed) {
				t.Fatalf("sync after clearing the fault: %v, want ErrFailed", err)
			}
		})
	}
}

// TestInjectedLatency: every operation waits the injected latency.
func TestInjectedLatency(t *testing.T) {
	d := openMem(t, 1<<20)
	f, _ := d.Create("a")
	d.InjectFault(Fault{Latency: 20 * time.Millisecond})
	start := time.Now()
	write(t, f, []byte("abcd"), 0)
	if _, err := f.ReadAt(make([]byte, 4), 0); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 40*time.Millisecond {
		t.Fatalf("write + read took %s with 20ms injected latency each", took)
	}
	if got := d.InjectedFault(); got.Latency != 20*time.Millisecond {
		t.Fatalf("InjectedFault = %v", got)
	}
}

func TestFaultValidate(t *testing.T) {
	for _, f := range []Fault{{ReadErr: -0.1}, {WriteErr: 1.5}, {Latency: -1}, {Latency: time.Hour}} {
		d := openMem(t, 1<<20)
		if err := d.InjectFault(f); err == nil {
			t.Errorf("InjectFault(%+v) accepted", f)
		}
	}
}
