package device

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"time"
)

// Fault injection — a test and chaos-suite hook, never used in production.
//
// A node exposes it only when started with --fault-injection (the admin
// endpoint /v1/debug/fault refuses otherwise). An injected fault acts where
// the medium would: the raw read, write or fsync returns EIO or ENOSPC
// before touching the file, so the Device classifies it exactly as it
// would a real error (EIO marks the device failed, ENOSPC is ErrFull), and
// latency is added to every operation like a dying or overloaded disk.

// Fault is the set of faults injected into one device. The zero Fault
// injects nothing.
type Fault struct {
	// ReadErr is the probability (0..1) that a read fails with EIO.
	ReadErr float64 `json:"read_err,omitempty"`
	// WriteErr is the probability (0..1) that a write or fsync fails with
	// EIO.
	WriteErr float64 `json:"write_err,omitempty"`
	// Full makes every write that grows a file fail with ENOSPC, as on a
	// filesystem that other files have filled.
	Full bool `json:"full,omitempty"`
	// Latency is added to every read, write and fsync.
	Latency time.Duration `json:"latency,omitempty"`
}

// IsZero reports whether f injects nothing.
func (f Fault) IsZero() bool { return f == Fault{} }

// Validate rejects probabilities outside [0, 1] and negative or absurd
// latencies.
func (f Fault) Validate() error {
	for name, p := range map[string]float64{"read_err": f.ReadErr, "write_err": f.WriteErr} {
		if !(p >= 0 && p <= 1) {
			return fmt.Errorf("device: fault %s %v: want a probability in [0, 1]", name, p)
		}
	}
	if f.Latency < 0 || f.Latency > time.Minute {
		return fmt.Errorf("device: fault latency %s: want 0..1m", f.Latency)
	}
	return nil
}

func (f Fault) String() string {
	if f.IsZero() {
		return "none"
	}
	return fmt.Sprintf("read_err=%g write_err=%g full=%v latency=%s", f.ReadErr, f.WriteErr, f.Full, f.Latency)
}

// InjectFault replaces the device's injected fault (the zero Fault clears
// it). It does not clear the failed state an injected EIO caused: like a
// real failed disk, the device stays out of service until the node
// restarts.
func (d *Device) InjectFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.IsZero() {
		d.fault.Store(nil)
		return nil
	}
	d.fault.Store(&f)
	return nil
}

// InjectedFault returns the fault injected now.
func (d *Device) InjectedFault() Fault {
	if f := d.fault.Load(); f != nil {
		return *f
	}
	return Fault{}
}

type faultOp int

const (
	faultRead faultOp = iota
	faultWrite
	faultSync
)

// injected applies the injected fault to one raw operation: it sleeps the
// latency and returns the error the medium would (nil: go ahead). grows
// says a write extends its file.
func (d *Device) injected(op faultOp, grows bool) error {
	f := d.fault.Load()
	if f == nil {
		return nil
	}
	if f.Latency > 0 {
		time.Sleep(f.Latency)
	}
	switch op {
	case faultRead:
		if f.ReadErr > 0 && rand.Float64() < f.ReadErr {
			return fmt.Errorf("injected fault: %w", syscall.EIO)
		}
	case faultWrite, faultSync:
		if f.WriteErr > 0 && rand.Float64() < f.WriteErr {
			return fmt.Errorf("injected fault: %w", syscall.EIO)
		}
		if op == faultWrite && grows && f.Full {
			return fmt.Errorf("injected fault: %w", syscall.ENOSPC)
		}
	}
	return nil
}
