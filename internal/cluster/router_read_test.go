package cluster

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/replica"
)

// TestRouterReadIntoLocalReusesBuffer: a streaming GET hands the router
// one chunk buffer per reader; for a replica on this node the verified
// bytes must land in that buffer (no megabyte allocated and zeroed per
// chunk, which was a fifth of a node's CPU during 4 MiB GETs).
func TestRouterReadIntoLocalReusesBuffer(t *testing.T) {
	d, err := device.Open("n1/ssd0", device.Spec{Tier: "ssd", Path: filepath.Join(t.TempDir(), "ssd0"), Capacity: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	local := replica.NewLocal("n1", "r1", []*device.Device{d})
	rt := NewRouter("n1", local, nil, []byte("secret"), nil)
	rep := model.Replica{Device: "n1/ssd0", Node: "n1", Tier: "ssd"}
	ctx := context.Background()
	payload := bytes.Repeat([]byte("terrace!"), 128<<10) // 1 MiB
	enc := extent.Encode(nil, payload)
	if err := local.Create(ctx, rep, 7); err != nil {
		t.Fatal(err)
	}
	if err := local.AppendSync(ctx, rep, 7, 0, enc); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 0, len(enc))
	got, err := rt.ReadInto(ctx, buf, rep, 7, 0, int64(len(payload)), 100, int64(len(payload)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, payload[100:]) {
		t.Fatal("ReadInto returned other bytes than were written")
	}
	// The result aliases buf's storage: clearing buf clears it.
	clear(buf[:cap(buf)])
	if !bytes.Equal(got, make([]byte, len(got))) {
		t.Fatal("ReadInto of a local replica did not use the caller's buffer")
	}
	// And reading again allocates nothing near the chunk's size.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const reads = 20
	for range reads {
		if _, err := rt.ReadInto(ctx, buf, rep, 7, 0, int64(len(payload)), 0, int64(len(payload))); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / reads; per > 256<<10 { // a fresh buffer is 1 MiB
		t.Fatalf("%d bytes allocated per 1 MiB read into a reused buffer", per)
	}
}
