package object

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

type env struct {
	t     testing.TB
	dir   string
	kv    *meta.Pebble
	local *Local
	l     *Layer
	specs []device.Spec
	// tweak, when set, adjusts the layer's options before each open.
	tweak func(*Options)
}

// newEnv builds a layer over real Pebble and real directory devices.
func newEnv(t testing.TB, specs ...string) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir()}
	if len(specs) == 0 {
		specs = []string{"ssd:ssd0:1GiB", "hdd:hdd0:1GiB", "hdd:hdd1:1GiB"}
	}
	for _, s := range specs {
		parts := strings.Split(s, ":")
		if parts[1] != "" {
			parts[1] = filepath.Join(e.dir, parts[1])
		}
		sp, err := device.ParseSpec(strings.Join(parts, ":"))
		if err != nil {
			t.Fatal(err)
		}
		e.specs = append(e.specs, sp)
	}
	e.open()
	return e
}

func (e *env) open() {
	t := e.t
	var devs []*device.Device
	counts := map[model.Tier]int{}
	for _, sp := range e.specs {
		id := model.DeviceID(fmt.Sprintf("n1/%s%d", sp.Tier, counts[sp.Tier]))
		counts[sp.Tier]++
		d, err := device.Open(id, sp)
		if err != nil {
			t.Fatal(err)
		}
		// Tiers differ in speed, so read ordering (OctopusFS §4.2)
		// deterministically tries the ssd replica first.
		switch sp.Tier {
		case model.TierSSD:
			d.SetThroughput(500e6, 400e6)
		default:
			d.SetThroughput(150e6, 150e6)
		}
		devs = append(devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(e.dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	e.kv = kv
	e.local = NewLocal("n1", "r1", devs)
	opts := Options{ExtentMaxBytes: 256 << 10, EgroupMaxBytes: 1 << 20, StatsInterval: 1}
	if e.tweak != nil {
		e.tweak(&opts)
	}
	l, err := New(kv, e.local, e.local, opts)
	if err != nil {
		t.Fatal(err)
	}
	e.l = l
	if _, err := l.Recover(context.Background(), e.local); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
}

func (e *env) close() {
	if e.l != nil {
		e.l.Close()
		e.kv.Close()
		e.l = nil
	}
}

func (e *env) restart() {
	e.close()
	e.open()
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func (e *env) put(bucket, key string, data []byte, v string) ObjectInfo {
	e.t.Helper()
	var vec model.Vector
	if v != "" {
		vec = model.MustParseVector(v)
	}
	info, err := e.l.Put(context.Background(), bucket, key, bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: vec})
	if err != nil {
		e.t.Fatalf("put %s/%s: %v", bucket, key, err)
	}
	return info
}

func (e *env) get(bucket, key string, off, n int64) ([]byte, error) {
	_, rc, err := e.l.Get(context.Background(), bucket, key, off, n)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

func TestPutGetRoundTrip(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt1", "me", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	sizes := []int{0, 1, 4096, extent.SliceSize - 1, extent.SliceSize, extent.SliceSize + 1, 256 << 10, 700 << 10, 3<<20 + 17}
	for i, n := range sizes {
		data := payload(uint64(i), n)
		key := fmt.Sprintf("obj-%d", n)
		info := e.put("bkt1", key, data, "ssd=1,hdd=1")
		sum := md5.Sum(data)
		if info.ETag != hex.EncodeToString(sum[:]) || info.Size != int64(n) {
			t.Fatalf("size %d: etag %s size %d", n, info.ETag, info.Size)
		}
		got, err := e.get("bkt1", key, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: roundtrip mismatch (err %v, got %d bytes)", n, err, len(got))
		}
		// Ranges that straddle slice and extent boundaries.
		r := rand.New(rand.NewPCG(uint64(n), 1))
		for j := 0; j < 20 && n > 0; j++ {
			off := r.Int64N(int64(n))
			ln := r.Int64N(int64(n)-off) + 1
			got, err := e.get("bkt1", key, off, ln)
			if err != nil || !bytes.Equal(got, data[off:off+ln]) {
				t.Fatalf("size %d range [%d,+%d): mismatch err=%v", n, off, ln, err)
			}
		}
		loc, err := e.l.Locate(ctx, "bkt1", key)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 && (loc.Tiers["ssd"] < 1 || loc.Tiers["hdd"] < 1) {
			t.Fatalf("size %d: replicas by tier %v, want ssd and hdd", n, loc.Tiers)
		}
	}
	if _, err := e.get("bkt1", "obj-4096", 4096, 1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("range past end: got %v, want ErrInvalidRange", err)
	}
	// Everything survives a restart.
	e.restart()
	for i, n := range sizes {
		got, err := e.get("bkt1", fmt.Sprintf("obj-%d", n), 0, -1)
		if err != nil || !bytes.Equal(got, payload(uint64(i), n)) {
			t.Fatalf("after restart size %d: mismatch err=%v", n, err)
		}
	}
}

func TestReplicasOnDistinctDevicesAndTiers(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	e.put("bkt", "k", payload(1, 3<<20), "hdd=2")
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	for _, x := range loc.Extents {
		if len(x.Replicas) != 2 || x.Replicas[0].Device == x.Replicas[1].Device {
			t.Fatalf("replicas %v: want 2 on distinct devices", x.Replicas)
		}
		for _, r := range x.Replicas {
			if r.Tier != model.TierHDD {
				t.Fatalf("replica on %s, want hdd", r.Tier)
			}
		}
	}
}

func TestBadVectors(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	cases := []struct {
		v    string
		want error
	}{
		{"nvme=1", model.ErrInvalidVector}, // unknown tier
		{"ssd=2", ErrInsufficientStorage},  // one ssd device only
		{"hdd=3", ErrInsufficientStorage},
	}
	for _, c := range cases {
		_, err := e.l.Put(ctx, "bkt", "k", strings.NewReader("x"), PutOptions{Size: 1, Vector: model.MustParseVector(c.v)})
		if !errors.Is(err, c.want) {
			t.Errorf("vector %s: got %v, want %v", c.v, err, c.want)
		}
	}
	if _, err := model.ParseVector("ssd=-1"); err == nil {
		t.Error("negative count accepted")
	}
	if err := e.l.CreateBucket(ctx, "Bad_Name!", "", model.Vector{}); !errors.Is(err, ErrInvalidBucketName) {
		t.Errorf("bad bucket name: %v", err)
	}
	if _, err := e.l.Put(ctx, "nope", "k", strings.NewReader("x"), PutOptions{Size: 1}); !errors.Is(err, ErrNoSuchBucket) {
		t.Errorf("missing bucket: %v", err)
	}
	if _, err := e.l.Put(ctx, "bkt", "k", strings.NewReader("x"), PutOptions{Size: 1, Class: "FROZEN"}); !errors.Is(err, ErrUnknownClass) {
		t.Errorf("unknown class: %v", err)
	}
	if _, err := e.l.Put(ctx, "bkt", "k", strings.NewReader("xy"), PutOptions{Size: 5}); !errors.Is(err, ErrIncompleteBody) {
		t.Errorf("short body: %v", err)
	}
	if _, err := e.l.Head(ctx, "bkt", "k"); !errors.Is(err, ErrNoSuchKey) {
		t.Errorf("failed puts left an object: %v", err)
	}
}

// TestListDelimiterPagination pins List against a model of S3 listing,
// page by page, for a live bucket and for a snapshot of it (listed key by
// key): a continuation after a common prefix does not list it again.
func TestListDelimiterPagination(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	keys := []string{"a", "a/1", "a/2", "a/b/1", "bkt", "b/1", "c/1/2", "c/2", "d", "d/"}
	for i := 0; i < 30; i++ {
		keys = append(keys, fmt.Sprintf("e/%03d", i))
	}
	for _, k := range keys {
		e.put("bkt", k, []byte(k), "hdd=1")
	}
	sort.Strings(keys)
	if _, err := e.l.CreateSnapshot(ctx, "bkt", "s"); err != nil {
		t.Fatal(err)
	}
	// A model of S3 listing.
	model := func(prefix, delim string) (objs, cps []string) {
		seen := map[string]bool{}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				continue
			}
			rest := k[len(prefix):]
			if delim != "" {
				if i := strings.Index(rest, delim); i >= 0 {
					cp := prefix + rest[:i+len(delim)]
					if !seen[cp] {
						seen[cp] = true
						cps = append(cps, cp)
					}
					continue
				}
			}
			objs = append(objs, k)
		}
		return
	}
	for _, tc := range []struct{ bucket, prefix, delim string }{
		{"bkt", "", ""}, {"bkt", "", "/"}, {"bkt", "a/", "/"}, {"bkt", "c", "/"}, {"bkt", "e/", ""}, {"bkt", "zz", "/"},
		{"bkt--snap-s", "", ""}, {"bkt--snap-s", "", "/"}, {"bkt--snap-s", "a/", "/"}, {"bkt--snap-s", "c", "/"},
	} {
		for _, pageSize := range []int{1, 2, 7, 1000} {
			var gotObjs, gotCPs []string
			after := ""
			for pages := 0; ; pages++ {
				if pages > 100 {
					t.Fatalf("%s prefix %q delim %q page %d: listing does not terminate", tc.bucket, tc.prefix, tc.delim, pageSize)
				}
				res, err := e.l.List(ctx, tc.bucket, ListOptions{Prefix: tc.prefix, Delimiter: tc.delim, After: after, MaxKeys: pageSize})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Objects)+len(res.CommonPrefixes) > pageSize {
					t.Fatalf("page of %d entries exceeds %d", len(res.Objects)+len(res.CommonPrefixes), pageSize)
				}
				for _, o := range res.Objects {
					gotObjs = append(gotObjs, o.Key)
				}
				gotCPs = append(gotCPs, res.CommonPrefixes...)
				if !res.Truncated {
					break
				}
				after = res.NextAfter
			}
			wantObjs, wantCPs := model(tc.prefix, tc.delim)
			if fmt.Sprint(gotObjs) != fmt.Sprint(wantObjs) || fmt.Sprint(gotCPs) != fmt.Sprint(wantCPs) {
				t.Fatalf("%s prefix %q delim %q page %d:\n got %v %v\nwant %v %v", tc.bucket, tc.prefix, tc.delim, pageSize, gotObjs, gotCPs, wantObjs, wantCPs)
			}
		}
	}
}

func TestMultipart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	id, err := e.l.CreateUpload(ctx, "bkt", "big", PutOptions{Vector: model.MustParseVector("ssd=1,hdd=1")})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := payload(1, MinPartBytes), payload(2, 1234)
	i1, err := e.l.UploadPart(ctx, "bkt", id, 1, bytes.NewReader(p1), int64(len(p1)), "")
	if err != nil {
		t.Fatal(err)
	}
	i2, err := e.l.UploadPart(ctx, "bkt", id, 2, bytes.NewReader(p2), int64(len(p2)), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{2, i2.ETag}, {1, i1.ETag}}, nil); !errors.Is(err, ErrInvalidPartOrder) {
		t.Fatalf("out of order: %v", err)
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, i1.ETag}, {2, "deadbeef"}}, nil); !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("bad etag: %v", err)
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{2, i2.ETag}, {3, i2.ETag}}, nil); !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("missing part: %v", err)
	}
	// An empty ETag (quoted or not) names no part.
	for _, empty := range []string{"", `""`} {
		if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, i1.ETag}, {2, empty}}, nil); !errors.Is(err, ErrInvalidPart) {
			t.Fatalf("empty etag %q: %v", empty, err)
		}
	}
	small, _ := e.l.CreateUpload(ctx, "bkt", "small", PutOptions{})
	s1, _ := e.l.UploadPart(ctx, "bkt", small, 1, bytes.NewReader(p2), int64(len(p2)), "")
	s2, _ := e.l.UploadPart(ctx, "bkt", small, 2, bytes.NewReader(p2), int64(len(p2)), "")
	if _, err := e.l.CompleteUpload(ctx, "bkt", small, []CompletePart{{1, s1.ETag}, {2, s2.ETag}}, nil); !errors.Is(err, ErrEntityTooSmall) {
		t.Fatalf("small part: %v", err)
	}
	ups, _, err := e.l.ListUploads(ctx, "bkt", "", 0)
	if err != nil || len(ups) != 2 {
		t.Fatalf("list uploads: %v %d", err, len(ups))
	}
	info, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, `"` + i1.ETag + `"`}, {2, i2.ETag}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := md5.New()
	for _, p := range [][]byte{p1, p2} {
		s := md5.Sum(p)
		h.Write(s[:])
	}
	if want := hex.EncodeToString(h.Sum(nil)) + "-2"; info.ETag != want {
		t.Fatalf("etag %s want %s", info.ETag, want)
	}
	got, err := e.get("bkt", "big", 0, -1)
	if err != nil || !bytes.Equal(got, append(append([]byte(nil), p1...), p2...)) {
		t.Fatalf("multipart content mismatch: %v", err)
	}
	if _, _, err := e.l.GetUpload(ctx, "bkt", id); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("completed upload still listed: %v", err)
	}
	if err := e.l.AbortUpload(ctx, "bkt", small); err != nil {
		t.Fatal(err)
	}
	if err := e.l.AbortUpload(ctx, "bkt", small); !errors.Is(err, ErrNoSuchUpload) {
		t.Fatalf("double abort: %v", err)
	}
	// Part copy shares extents when vectors match.
	cp, _ := e.l.CreateUpload(ctx, "bkt", "copy", PutOptions{Vector: model.MustParseVector("ssd=1,hdd=1")})
	pc, err := e.l.UploadPartCopy(ctx, "bkt", cp, 1, "bkt", "big", 10, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", cp, []CompletePart{{1, pc.ETag}}, nil); err != nil {
		t.Fatal(err)
	}
	got, _ = e.get("bkt", "copy", 0, -1)
	if !bytes.Equal(got, p1[10:1010]) {
		t.Fatal("part copy content mismatch")
	}
}

func TestCopyAndSetReplication(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	data := payload(9, 600<<10)
	e.put("bkt", "src", data, "ssd=1,hdd=1")
	if _, err := e.l.Copy(ctx, "bkt", "src", "bkt", "same", CopyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Copy(ctx, "bkt", "src", "bkt", "cold", CopyOptions{Vector: model.MustParseVector("hdd=2")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"same", "cold"} {
		got, err := e.get("bkt", k, 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("copy %s mismatch: %v", k, err)
		}
	}
	loc, _ := e.l.Locate(ctx, "bkt", "cold")
	if loc.Tiers["ssd"] != 0 || loc.Tiers["hdd"] == 0 || loc.Vector != "hdd=2" {
		t.Fatalf("cold copy placed %v vector %s", loc.Tiers, loc.Vector)
	}
	done, err := e.l.SetReplication(ctx, "bkt", "src", model.MustParseVector("hdd=2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	loc, _ = e.l.Locate(ctx, "bkt", "src")
	if loc.Vector != "hdd=2" || loc.Tiers["ssd"] != 0 {
		t.Fatalf("after set-replication: vector %s tiers %v", loc.Vector, loc.Tiers)
	}
	got, _ := e.get("bkt", "src", 0, -1)
	if !bytes.Equal(got, data) {
		t.Fatal("set-replication changed the bytes")
	}
}

// corruptReplica flips one byte in the replica file of the object's first
// egroup on the given tier.
func (e *env) corruptReplica(bucket, key string, tier model.Tier) {
	e.t.Helper()
	loc, err := e.l.Locate(context.Background(), bucket, key)
	if err != nil {
		e.t.Fatal(err)
	}
	x := loc.Extents[0]
	for _, r := range x.Replicas {
		if r.Tier != tier {
			continue
		}
		st, _ := e.local.Store(r.Device)
		path := filepath.Join(st.Device().Spec().Path, extent.FileName(x.Egroup))
		b, err := os.ReadFile(path)
		if err != nil {
			e.t.Fatal(err)
		}
		b[x.EgroupOff+extent.HeaderSize+3] ^= 0x40
		if err := os.WriteFile(path, b, 0o644); err != nil {
			e.t.Fatal(err)
		}
		return
	}
	e.t.Fatalf("no replica on tier %s", tier)
}

func TestCorruptReplicaFallsBackAndIsReported(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	data := payload(3, 100<<10)
	e.put("bkt", "k", data, "ssd=1,hdd=1")
	e.restart() // drop cached file handles' page views; read from disk
	e.corruptReplica("bkt", "k", model.TierSSD)
	for i := 0; i < 3; i++ {
		got, err := e.get("bkt", "k", 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read with one bad replica: err %v, equal %v", err, bytes.Equal(got, data))
		}
	}
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	bad := 0
	for _, r := range loc.Extents[0].Replicas {
		if r.Bad {
			bad++
			if r.Tier != model.TierSSD {
				t.Fatalf("wrong replica marked bad: %+v", r)
			}
		}
	}
	if bad != 1 {
		t.Fatalf("%d replicas marked bad, want 1", bad)
	}
	// Both replicas bad: a clear error, never wrong bytes.
	e.put("bkt", "k2", data, "ssd=1,hdd=1")
	e.corruptReplica("bkt", "k2", model.TierSSD)
	e.corruptReplica("bkt", "k2", model.TierHDD)
	got, err := e.get("bkt", "k2", 0, -1)
	if !errors.Is(err, ErrNoGoodReplica) {
		t.Fatalf("two bad replicas: err %v, got %d bytes", err, len(got))
	}
}

func TestFullDeviceFailsCleanly(t *testing.T) {
	e := newEnv(t, "ssd:ssd0:3MiB", "hdd:hdd0:64MiB")
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	var stored [][]byte
	var err error
	for i := 0; i < 100; i++ {
		data := payload(uint64(i), 300<<10)
		_, err = e.l.Put(ctx, "bkt", fmt.Sprint(i), bytes.NewReader(data), PutOptions{Size: int64(len(data)), Vector: model.MustParseVector("ssd=1,hdd=1")})
		if err != nil {
			break
		}
		stored = append(stored, data)
	}
	if !errors.Is(err, ErrInsufficientStorage) {
		t.Fatalf("filling ssd: got %v, want ErrInsufficientStorage", err)
	}
	if len(stored) == 0 {
		t.Fatal("nothing stored before the device filled")
	}
	for i, data := range stored {
		got, err := e.get("bkt", fmt.Sprint(i), 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("object %d damaged after full device: %v", i, err)
		}
	}
	if _, err := e.l.Head(ctx, "bkt", fmt.Sprint(len(stored))); !errors.Is(err, ErrNoSuchKey) {
		t.Fatalf("failed put is visible: %v", err)
	}
	// hdd-only writes still work.
	e.put("bkt", "hdd-only", payload(1, 1000), "hdd=1")
}

func TestRecoveryTruncatesUnacknowledgedBytes(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	data := payload(5, 70<<10)
	e.put("bkt", "k", data, "ssd=1,hdd=1")
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	local := e.local
	e.close()
	e.local = local
	// Simulate a crash after an append but before its commit: garbage
	// past the committed length, and an orphan egroup file.
	var paths []string
	for _, r := range loc.Extents[0].Replicas {
		st, _ := e.local.Store(r.Device)
		paths = append(paths, filepath.Join(st.Device().Spec().Path, extent.FileName(loc.Extents[0].Egroup)))
	}
	appendGarbage(t, paths)
	orphan := filepath.Join(e.specs[0].Path, extent.FileName(999999))
	os.MkdirAll(filepath.Dir(orphan), 0o755)
	os.WriteFile(orphan, []byte("junk"), 0o644)
	e.open()
	rep, err := e.l.Recover(ctx, e.local)
	if err != nil {
		t.Fatal(err)
	}
	_ = rep
	for _, p := range paths {
		st, _ := os.Stat(p)
		if st.Size() != extent.EncodedLen(int64(len(data))) {
			t.Fatalf("%s: size %d after recovery, want %d", p, st.Size(), extent.EncodedLen(int64(len(data))))
		}
	}
	if _, err := os.Stat(orphan); !os.IsNotExist(err) {
		t.Fatal("orphan egroup file not removed")
	}
	got, err := e.get("bkt", "k", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestDeleteBucket(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); !errors.Is(err, ErrBucketExists) {
		t.Fatalf("duplicate: %v", err)
	}
	e.put("bkt", "k", []byte("x"), "hdd=1")
	if err := e.l.DeleteBucket(ctx, "bkt"); !errors.Is(err, ErrBucketNotEmpty) {
		t.Fatalf("non-empty delete: %v", err)
	}
	e.put("bkt", "k2", []byte("y"), "hdd=1") // the bucket is usable after a refused delete
	e.l.Delete(ctx, "bkt", "k")
	e.l.Delete(ctx, "bkt", "k2")
	if err := e.l.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.l.GetBucket(ctx, "bkt"); !errors.Is(err, ErrNoSuchBucket) {
		t.Fatalf("deleted bucket: %v", err)
	}
}

func TestConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	errc := make(chan error, 16)
	for w := 0; w < 16; w++ {
		go func() {
			for i := 0; i < 10; i++ {
				data := payload(uint64(w*100+i), 1000+w*i*997)
				if _, err := e.l.Put(ctx, "bkt", fmt.Sprintf("%d/%d", w, i), bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for w := 0; w < 16; w++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	for w := 0; w < 16; w++ {
		for i := 0; i < 10; i++ {
			got, err := e.get("bkt", fmt.Sprintf("%d/%d", w, i), 0, -1)
			if err != nil || !bytes.Equal(got, payload(uint64(w*100+i), 1000+w*i*997)) {
				t.Fatalf("%d/%d: %v", w, i, err)
			}
		}
	}
}

func TestAccessTracking(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	e.put("bkt", "k", []byte("hello"), "hdd=1")
	for i := 0; i < 3; i++ {
		e.get("bkt", "k", 0, -1)
	}
	if err := e.l.FlushAccess(ctx); err != nil {
		t.Fatal(err)
	}
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	var a meta.Access
	if _, err := meta.GetRecord(ctx, e.kv, meta.AccessKey(loc.Extents[0].Egroup), &a); err != nil {
		t.Fatal(err)
	}
	if a.Reads != 3 || a.Atime == 0 {
		t.Fatalf("access record %+v, want 3 reads", a)
	}
}

// TestHotReadsRequestPromotion: the flush that takes an egroup's window
// read count to the threshold writes one promotion request; further reads
// in the same window do not write another, and a new window does.
func TestHotReadsRequestPromotion(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.l.access.hotReads = 3
	now := time.Unix(1_800_000_000, 0)
	e.l.access.now = func() time.Time { return now }
	e.l.CreateBucket(ctx, "bkt", "", model.Vector{})
	e.put("bkt", "k", []byte("hello"), "hdd=1")
	loc, _ := e.l.Locate(ctx, "bkt", "k")
	id := loc.Extents[0].Egroup
	requests := func() []meta.Item {
		t.Helper()
		if err := e.l.FlushAccess(ctx); err != nil {
			t.Fatal(err)
		}
		items, err := e.kv.Scan(ctx, []byte(meta.PrefixHot), meta.PrefixEnd([]byte(meta.PrefixHot)), 0)
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	e.get("bkt", "k", 0, -1)
	e.get("bkt", "k", 0, -1)
	if r := requests(); len(r) != 0 {
		t.Fatalf("2 reads made %d requests, want 0", len(r))
	}
	e.get("bkt", "k", 0, -1)
	r := requests()
	if len(r) != 1 {
		t.Fatalf("3 reads made %d requests, want 1", len(r))
	}
	if got, err := meta.ParseHotKey(r[0].Key); err != nil || got != id {
		t.Fatalf("request for %v (%v), want egroup %s", got, err, meta.FormatID(id))
	}
	var hr meta.HotRequest
	if err := meta.Decode(r[0].Value, &hr); err != nil || hr.Reads != 3 {
		t.Fatalf("request %+v (%v), want 3 reads", hr, err)
	}
	// The Curator takes the request; more reads in the window ask nothing.
	var del meta.Txn
	del.Del(r[0].Key)
	if _, err := e.kv.Commit(ctx, &del); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		e.get("bkt", "k", 0, -1)
	}
	if r := requests(); len(r) != 0 {
		t.Fatalf("reads past the threshold made %d new requests", len(r))
	}
	// A new window: the count restarts, and crossing again asks again.
	now = now.Add(2 * time.Hour)
	for range 3 {
		e.get("bkt", "k", 0, -1)
	}
	if r := requests(); len(r) != 1 {
		t.Fatalf("a new window's crossing made %d requests, want 1", len(r))
	}
}

// TestPutStageHistogram: every successful PUT observes its data and its
// commit stage once; a PUT refused before it writes observes neither.
func TestPutStageHistogram(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt1", "me", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	count := func(stage string) uint64 {
		var m dto.Metric
		if err := e.l.m.putStage.WithLabelValues(stage).(prometheus.Histogram).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetHistogram().GetSampleCount()
	}
	for i := range 3 {
		e.put("bkt1", fmt.Sprintf("k%d", i), payload(uint64(i), 4096), "ssd=1,hdd=1")
	}
	if _, err := e.l.Put(ctx, "no-such-bucket", "k", bytes.NewReader([]byte("x")), PutOptions{Size: 1}); err == nil {
		t.Fatal("a PUT into a missing bucket succeeded")
	}
	if d, c := count("data"), count("commit"); d != 3 || c != 3 {
		t.Fatalf("observed %d data and %d commit stages for 3 PUTs", d, c)
	}
}

// TestCollectOrphanPartsKeepsLiveUploads: only part records whose upload
// record is gone are removed; a live upload's parts (in another bucket,
// and in the same bucket, sorted on both sides of the orphan) stay and
// the upload still completes.
func TestCollectOrphanPartsKeepsLiveUploads(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, b := range []string{"bkt", "bkt2"} {
		if err := e.l.CreateBucket(ctx, b, "", model.Vector{}); err != nil {
			t.Fatal(err)
		}
	}
	type upl struct{ bucket, id, etag string }
	var ups []upl
	for _, b := range []string{"bkt", "bkt", "bkt", "bkt2"} {
		id, err := e.l.CreateUpload(ctx, b, "k", PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p := payload(uint64(len(ups)), 1000)
		pi, err := e.l.UploadPart(ctx, b, id, 1, bytes.NewReader(p), int64(len(p)), "")
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, upl{b, id, pi.ETag})
	}
	// The second upload's record goes without its parts (a complete or
	// abort cut off between its two commits).
	orphan := ups[1]
	var tx meta.Txn
	tx.Del(meta.UploadKey(orphan.bucket, orphan.id))
	if _, err := e.kv.Commit(ctx, &tx); err != nil {
		t.Fatal(err)
	}
	n, err := e.l.CollectOrphanParts(ctx)
	if err != nil || n != 1 {
		t.Fatalf("collected %d, %v; want the orphan's one part", n, err)
	}
	if _, err := e.kv.Get(ctx, meta.PartKey(orphan.bucket, orphan.id, 1)); !errors.Is(err, meta.ErrNotFound) {
		t.Fatalf("orphan part: %v", err)
	}
	for i, u := range ups {
		if i == 1 {
			continue
		}
		if _, err := e.l.CompleteUpload(ctx, u.bucket, u.id, []CompletePart{{1, u.etag}}, nil); err != nil {
			t.Fatalf("live upload %d after the collection: %v", i, err)
		}
	}
	if n, err := e.l.CollectOrphanParts(ctx); err != nil || n != 0 {
		t.Fatalf("second pass: %d, %v", n, err)
	}
}
