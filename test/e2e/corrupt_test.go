package e2e

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Slice layout (internal/extent): 8-byte header (length, CRC32C) then up
// to 64 KiB of payload. The tests compute file offsets from it so that a
// flipped byte lands inside a chosen object's payload.
const (
	sliceHeader  = 8
	slicePayload = 64 << 10
)

// noCurator keeps background scrubbing and repair out of the way, so the
// test sees exactly what the foreground read path does.
const noCurator = "curator:\n  disabled: true\n"

func corruptSpec(dir string) serverSpec {
	return serverSpec{
		dataDir: filepath.Join(dir, "data"),
		// Emulation profiles make read ordering deterministic (ssd first).
		devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB:ssd", "hdd:" + filepath.Join(dir, "hdd0") + ":1GiB:hdd"},
		vector:  "ssd=1,hdd=1",
		config:  noCurator,
	}
}

// payloadOffset is the file offset of payload byte i of an extent that
// starts at file offset extOff.
func payloadOffset(extOff, i int64) int64 {
	return extOff + (i/slicePayload)*(slicePayload+sliceHeader) + sliceHeader + i%slicePayload
}

func replicaOn(t *testing.T, x extentLoc, tier string) replica {
	t.Helper()
	for _, r := range x.Replicas {
		if r.Tier == tier {
			return r
		}
	}
	t.Fatalf("extent %d has no %s replica: %+v", x.Extent, tier, x.Replicas)
	return replica{}
}

func mustLocate(t *testing.T, c *client, bucket, key string) location {
	t.Helper()
	loc, err := c.locate(bucket, key)
	if err != nil {
		t.Fatalf("locate %s/%s: %v", bucket, key, err)
	}
	if len(loc.Extents) == 0 {
		t.Fatalf("locate %s/%s: no extents", bucket, key)
	}
	return loc
}

func mustGet(t *testing.T, c *client, bucket, key string, want []byte) {
	t.Helper()
	got, err := c.get(bucket, key)
	if err != nil {
		t.Fatalf("GET %s/%s: %v", bucket, key, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("GET %s/%s returned wrong bytes: %s", bucket, key, diff(got, want))
	}
}

func counter(t *testing.T, c *client) float64 {
	t.Helper()
	v, err := c.metric("terrace_object_corrupt_replica_reads_total")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestCorruptReplica flips bytes inside egroup replica files of a running
// server (bit rot). docs/design/0000 invariant 5: a read verifies every slice, falls
// back to the other replica and reports the bad one; when no replica holds
// good bytes it fails with a clear error — never returns wrong bytes.
func TestCorruptReplica(t *testing.T) {
	dir := t.TempDir()
	spec := corruptSpec(dir)
	srv := startServer(t, spec)
	c := srv.client()
	if err := c.createBucket("rot", ""); err != nil {
		t.Fatal(err)
	}
	seed := uint64(42)
	a := content(seed, "a", 0, 300<<10, 300<<10) // five slices
	b := content(seed, "b", 0, 200<<10, 200<<10)
	for k, v := range map[string][]byte{"a": a} {
		if err := c.put("rot", k, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.put("rot", "b", b); err != nil {
		t.Fatal(err)
	}
	big := content(seed, "c", 0, 5<<19, 5<<19) // 2.5 MiB: streamed in 1 MiB chunks
	if err := c.put("rot", "c", big); err != nil {
		t.Fatal(err)
	}
	locA := mustLocate(t, c, "rot", "a")
	if locA.Tiers["ssd"] != 1 || locA.Tiers["hdd"] != 1 {
		t.Fatalf("a not on ssd and hdd: %+v", locA)
	}
	xa := locA.Extents[0]
	files := map[string]string{} // tier -> replica file of a's egroup
	for _, tier := range []string{"ssd", "hdd"} {
		files[tier] = egroupFile(spec.devDir(t, replicaOn(t, xa, tier).Device), xa.Egroup)
		if fileSize(t, files[tier]) < xa.EgroupOff+int64(len(a)) {
			t.Fatalf("%s replica %s shorter than extent", tier, files[tier])
		}
	}

	// 1. One replica rots inside a's third slice. Reads must return a's
	// bytes and the corrupt replica must be reported. Which replica is read
	// first is the read-ordering policy's choice, so if the first read did
	// not touch the rotten one, move the rot to the other replica.
	before := counter(t, c)
	off := payloadOffset(xa.EgroupOff, 2*slicePayload+1234)
	tiers := []string{"ssd", "hdd"}
	rotten := ""
	for try := 0; try < 4 && rotten == ""; try++ {
		tier := tiers[try%2]
		flipByte(t, files[tier], off)
		mustGet(t, c, "rot", "a", a)
		if counter(t, c) > before {
			rotten = tier
			break
		}
		flipByte(t, files[tier], off) // undo: this replica was not read
	}
	if rotten == "" {
		t.Fatal("corrupt replica never detected by reads")
	}
	t.Logf("corrupted the %s replica; read fell back to the other one", rotten)
	locA = mustLocate(t, c, "rot", "a")
	for _, r := range locA.Extents[0].Replicas {
		if r.Bad != (r.Tier == rotten) {
			t.Errorf("after the corrupt read, replica %s bad=%v; want only the %s replica bad", r.Device, r.Bad, rotten)
		}
	}
	mustGet(t, c, "rot", "a", a) // still good (the bad replica is skipped)
	rep, err := c.report()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Devices {
		if want := map[bool]int{true: 1, false: 0}[d.Tier == rotten]; d.BadReplicas != want {
			t.Errorf("tier report: device %s has %d bad replicas, want %d", d.ID, d.BadReplicas, want)
		}
	}

	// 2. Now the other replica rots too, inside b's bytes. b has no good
	// copy left: its read must fail with a clear server error, not return
	// wrong or truncated bytes with a 200.
	locB := mustLocate(t, c, "rot", "b")
	xb := locB.Extents[0]
	for _, tier := range tiers {
		f := egroupFile(spec.devDir(t, replicaOn(t, xb, tier).Device), xb.Egroup)
		flipByte(t, f, payloadOffset(xb.EgroupOff, 100<<10))
	}
	got, err := c.get("rot", "b")
	var ae *apiErr
	switch {
	case err == nil:
		t.Fatalf("GET b with every replica corrupt returned %d bytes and no error (equal to original: %v)", len(got), bytes.Equal(got, b))
	case !errors.As(err, &ae):
		t.Fatalf("GET b with every replica corrupt: want an HTTP 5xx with a message, got a broken response: %v", err)
	case ae.Status < 500 || !strings.Contains(ae.Msg, "corrupt"):
		t.Fatalf("GET b with every replica corrupt: want HTTP 5xx naming the corruption, got %v", ae)
	default:
		t.Logf("GET b with every replica corrupt: %v", ae)
	}
	if !srv.alive() {
		t.Fatal("server died")
	}

	// 3. a's bytes are still intact on one replica (the rot in that file
	// is inside b), so a must stay readable even though both replicas of
	// its egroup are now marked bad: reads are verified, so trying a
	// replica marked bad as a last resort is safe.
	mustGet(t, c, "rot", "a", a)

	// 4. Rot in both replicas deep inside a large object: the first
	// megabyte has already been sent with a 200 when the bad slice is
	// reached, so the server must cut the body short (the client sees a
	// length mismatch) — what arrived is a prefix of the true bytes, never
	// a full-length body with wrong bytes in it.
	mustGet(t, c, "rot", "c", big)
	xc := mustLocate(t, c, "rot", "c").Extents[0]
	for _, tier := range tiers {
		f := egroupFile(spec.devDir(t, replicaOn(t, xc, tier).Device), xc.Egroup)
		flipByte(t, f, payloadOffset(xc.EgroupOff, 2<<20+100))
	}
	got, err = c.get("rot", "c")
	if err == nil {
		t.Fatalf("GET of a large object with every replica corrupt succeeded (%d bytes, equal: %v)", len(got), bytes.Equal(got, big))
	}
	if len(got) > 2<<20+100 || !bytes.Equal(got, big[:len(got)]) {
		t.Fatalf("GET of a large object with every replica corrupt delivered %d bytes that are not a prefix of the object", len(got))
	}
	t.Logf("large object with every replica corrupt: %d good bytes, then %v", len(got), err)
	if out, err := srv.cli("get", "rot/c", filepath.Join(dir, "c.out")); err == nil {
		t.Fatalf("terrace get of an unreadable object exited 0:\n%s", out)
	} else {
		t.Logf("terrace get: %v: %s", err, strings.TrimSpace(out))
	}
	if !srv.alive() {
		t.Fatal("server died")
	}
}

// TestTornTailAndLostTail damages replica files while the server is down:
// garbage past the committed length (a torn write of an unacknowledged
// PUT) must be truncated by recovery; a replica that lost committed bytes
// must be marked bad and reads served from the other replica.
func TestTornTailAndLostTail(t *testing.T) {
	dir := t.TempDir()
	spec := corruptSpec(dir)
	spec.devices = []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB", "hdd:" + filepath.Join(dir, "hdd0") + ":1GiB"}
	srv := startServer(t, spec)
	c := srv.client()
	if err := c.createBucket("torn", ""); err != nil {
		t.Fatal(err)
	}
	x := content(7, "x", 0, 150<<10, 150<<10)
	y := content(7, "y", 0, 70<<10, 70<<10)
	if err := c.put("torn", "x", x); err != nil {
		t.Fatal(err)
	}
	if err := c.put("torn", "y", y); err != nil {
		t.Fatal(err)
	}
	loc := mustLocate(t, c, "torn", "y")
	ext := loc.Extents[0]
	files := map[string]string{}
	sizes := map[string]int64{}
	srv.stop()
	for _, tier := range []string{"ssd", "hdd"} {
		files[tier] = egroupFile(spec.devDir(t, replicaOn(t, ext, tier).Device), ext.Egroup)
		sizes[tier] = fileSize(t, files[tier])
	}
	if sizes["ssd"] != sizes["hdd"] || sizes["ssd"] != ext.EgroupOff+int64(len(y))+2*sliceHeader {
		t.Fatalf("replica sizes %v, want both %d", sizes, ext.EgroupOff+int64(len(y))+2*sliceHeader)
	}

	// Torn tails: random garbage on one replica; on the other, a slice
	// with a valid checksum (a complete but unacknowledged append). Both
	// lie past the committed length and must go.
	appendTo := func(path string, b []byte) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(b); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	appendTo(files["ssd"], content(1, "garbage", 0, 5000, 5000))
	appendTo(files["hdd"], validSlice([]byte("an unacknowledged append")))
	srv = startServer(t, spec)
	rep := srv.recoveryReport()
	t.Logf("recovery after torn tails: %v", rep)
	if rep["truncated"] != 2 || rep["damaged"] != 0 {
		t.Errorf("recovery %v: want truncated=2 damaged=0", rep)
	}
	for tier, f := range files {
		if got := fileSize(t, f); got != sizes[tier] {
			t.Errorf("%s replica is %d bytes after recovery, want %d", tier, got, sizes[tier])
		}
	}
	c = srv.client()
	mustGet(t, c, "torn", "x", x)
	mustGet(t, c, "torn", "y", y)
	for _, r := range mustLocate(t, c, "torn", "y").Extents[0].Replicas {
		if r.Bad {
			t.Errorf("replica %s marked bad after a torn tail", r.Device)
		}
	}

	// Lost tail: the hdd replica loses its last 100 committed bytes (y's
	// last slice). Recovery marks it bad; y reads from the ssd replica.
	srv.stop()
	if err := os.Truncate(files["hdd"], sizes["hdd"]-100); err != nil {
		t.Fatal(err)
	}
	srv = startServer(t, spec)
	rep = srv.recoveryReport()
	t.Logf("recovery after lost tail: %v", rep)
	if rep["damaged"] != 1 {
		t.Errorf("recovery %v: want damaged=1", rep)
	}
	c = srv.client()
	for _, r := range mustLocate(t, c, "torn", "y").Extents[0].Replicas {
		if r.Bad != (r.Tier == "hdd") {
			t.Errorf("after lost tail: replica %s (%s) bad=%v", r.Device, r.Tier, r.Bad)
		}
	}
	mustGet(t, c, "torn", "y", y)
	mustGet(t, c, "torn", "x", x)
	// New writes still work and go to a fresh egroup.
	z := content(7, "z", 0, 90<<10, 90<<10)
	if err := c.put("torn", "z", z); err != nil {
		t.Fatal(err)
	}
	mustGet(t, c, "torn", "z", z)
	if lz := mustLocate(t, c, "torn", "z"); lz.Extents[0].Egroup == ext.Egroup {
		t.Errorf("write after recovery appended to the recovered (sealed) egroup %d", ext.Egroup)
	}
}

// validSlice encodes p as one slice with a correct CRC32C.
func validSlice(p []byte) []byte {
	out := make([]byte, sliceHeader+len(p))
	binary.LittleEndian.PutUint32(out[0:4], uint32(len(p)))
	tab := crc32.MakeTable(crc32.Castagnoli)
	crc := crc32.Update(crc32.Update(0, tab, out[0:4]), tab, p)
	binary.LittleEndian.PutUint32(out[4:8], crc)
	copy(out[sliceHeader:], p)
	return out
}
