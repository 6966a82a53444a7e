package replica

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
)

func newLocal(t *testing.T) (*Local, string) {
	t.Helper()
	dir := t.TempDir()
	var devs []*device.Device
	for _, n := range []string{"ssd0", "hdd0"} {
		tier := model.Tier(n[:3])
		d, err := device.Open(model.DeviceID("n1/"+n), device.Spec{Tier: tier, Path: filepath.Join(dir, n), Capacity: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	return NewLocal("n1", "r1", devs), dir
}

var (
	src = model.Replica{Device: "n1/ssd0", Node: "n1", Tier: "ssd"}
	dst = model.Replica{Device: "n1/hdd0", Node: "n1", Tier: "hdd"}
)

// write stores payload as egroup id on r and returns the encoded size.
func write(t *testing.T, l *Local, r model.Replica, id uint64, payload []byte) int64 {
	t.Helper()
	ctx := context.Background()
	enc := extent.Encode(nil, payload)
	if err := l.Create(ctx, r, id); err != nil {
		t.Fatal(err)
	}
	if err := l.Append(ctx, r, id, 0, enc); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx, r, id); err != nil {
		t.Fatal(err)
	}
	return int64(len(enc))
}

// TestPull copies a multi-chunk egroup and reads it back verified.
func TestPull(t *testing.T) {
	l, _ := newLocal(t)
	ctx := context.Background()
	payload := bytes.Repeat([]byte("terrace!"), (9<<20)/8) // spans three copy chunks
	size := write(t, l, src, 7, payload)
	if err := l.Pull(ctx, dst, src, 7, size); err != nil {
		t.Fatal(err)
	}
	got, err := l.Read(ctx, dst, 7, 0, int64(len(payload)), 0, int64(len(payload)))
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("copy reads back %d bytes, %v", len(got), err)
	}
}

// TestPullFromCorruptSource: a flipped byte in the source fails the copy
// with ErrCorrupt and leaves no file at the destination.
func TestPullFromCorruptSource(t *testing.T) {
	l, dir := newLocal(t)
	ctx := context.Background()
	size := write(t, l, src, 9, bytes.Repeat([]byte{0xab}, 100<<10))
	p := filepath.Join(dir, "ssd0", extent.FileName(9))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	err = l.Pull(ctx, dst, src, 9, size)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("pull from a corrupt source: %v, want ErrCorrupt", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "hdd0", extent.FileName(9))); !os.IsNotExist(err) {
		t.Fatalf("a failed pull left a file behind: %v", err)
	}
}

// TestPullMissingSource fails cleanly with ErrNotExist.
func TestPullMissingSource(t *testing.T) {
	l, _ := newLocal(t)
	if err := l.Pull(context.Background(), dst, src, 11, 4096); !errors.Is(err, ErrNotExist) {
		t.Fatalf("pull of a missing replica: %v", err)
	}
}

// TestPullIsIdempotent: a second pull of the same move keeps the verified
// copy in place (it must not truncate a replica metadata may already list)
// and concurrent pulls of one replica do not interleave.
func TestPullIsIdempotent(t *testing.T) {
	l, dir := newLocal(t)
	ctx := context.Background()
	size := write(t, l, src, 5, bytes.Repeat([]byte{7}, 300<<10))
	if err := l.Pull(ctx, dst, src, 5, size); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "hdd0", extent.FileName(5))
	before, _ := os.Stat(p)
	// The source disappears: a repeated pull must not need it.
	if err := l.Remove(ctx, src, 5); err != nil {
		t.Fatal(err)
	}
	if err := l.Pull(ctx, dst, src, 5, size); err != nil {
		t.Fatalf("repeated pull: %v", err)
	}
	after, _ := os.Stat(p)
	if !after.ModTime().Equal(before.ModTime()) || after.Size() != before.Size() {
		t.Fatal("a repeated pull rewrote the copy")
	}
	// Concurrent pulls of a fresh replica.
	size = write(t, l, src, 6, bytes.Repeat([]byte{9}, 2<<20))
	errc := make(chan error, 4)
	for range 4 {
		go func() { errc <- l.Pull(ctx, dst, src, 6, size) }()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatalf("concurrent pull: %v", err)
		}
	}
	if err := l.Verify(ctx, dst, 6, size); err != nil {
		t.Fatal(err)
	}
}
