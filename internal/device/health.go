package device

import (
	"bytes"
	"errors"
	"fmt"
)

// healthFile is the scratch file of Check; it never outlives the check.
const healthFile = ".health"

// Check is the periodic health check: it writes, syncs and reads back one
// 4 KiB block through the same I/O path as data, so a medium that returns
// EIO is marked failed (ioErr) even when no client or background I/O has
// touched it lately. Without it a dead disk that holds only cold replicas
// stays "up" until something happens to read it, and the Curator's
// failure-driven re-protection waits for that. A full device is healthy
// (ErrFull is not a failure); remote tiers are not checked here (their
// requests report their own errors). It returns the device's error, or
// ErrFailed once the device is failed.
func (d *Device) Check() error {
	if d.failed.Load() {
		return fmt.Errorf("device %s: %w", d.id, ErrFailed)
	}
	if d.spec.Remote() {
		return nil
	}
	block := bytes.Repeat([]byte{0xa5}, 4096)
	f, err := d.Create(healthFile)
	if err != nil {
		return healthErr(err)
	}
	defer func() { _ = d.Remove(healthFile) }()
	defer f.Close()
	if _, err := f.WriteAt(block, 0); err != nil {
		return healthErr(err)
	}
	if err := f.Sync(); err != nil {
		return healthErr(err)
	}
	got := make([]byte, len(block))
	if _, err := f.ReadAt(got, 0); err != nil {
		return healthErr(err)
	}
	if !bytes.Equal(got, block) {
		d.failed.Store(true)
		return fmt.Errorf("device %s: health check read back different bytes: %w", d.id, ErrFailed)
	}
	return nil
}

func healthErr(err error) error {
	if errors.Is(err, ErrFull) {
		return nil
	}
	return err
}
