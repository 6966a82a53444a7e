package object

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/transform"
)

func sixDevices() []string {
	return []string{"hdd:h0:1GiB", "hdd:h1:1GiB", "hdd:h2:1GiB", "hdd:h3:1GiB", "hdd:h4:1GiB", "hdd:h5:1GiB", "hdd:h6:1GiB"}
}

// devPath is the directory of a device of the env by ID (n1/hddN).
func (e *env) devPath(id model.DeviceID) string {
	var n int
	fmt.Sscanf(string(id), "n1/hdd%d", &n)
	return e.specs[n].Path
}

func TestErasureCodeReadDegradedRebuildDecode(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	objs := map[string][]byte{}
	for i, n := range []int{5_000, 300_000, 900_000} {
		k := fmt.Sprintf("o%d", i)
		objs[k] = payload(uint64(i+10), n)
		e.put("cold", k, objs[k], "hdd=3")
	}
	objs["log"] = logText(4, 400_000)
	e.put("cold", "log", objs["log"], "hdd=3")
	e.l.SealIdle(ctx, 0)
	srcs := map[uint64]bool{}
	for k := range objs {
		loc, _ := e.l.Locate(ctx, "cold", k)
		for _, x := range loc.Extents {
			srcs[x.Egroup] = true
		}
	}
	var sources []RewriteSource
	var plainBytes int64
	for id := range srcs {
		sources = append(sources, e.source(id))
		eg, _, _ := e.l.Egroup(ctx, id)
		plainBytes += eg.Size * int64(len(eg.Replicas))
	}
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=3"), Codec: "zstd", EC: transform.ECShape{K: 4, M: 2},
		Label: "ec-encode", Sources: sources})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stale != 0 || res.Moved == 0 {
		t.Fatalf("encode: %+v", res)
	}
	var ecID uint64
	var physical int64
	for k, want := range objs {
		loc, _ := e.l.Locate(ctx, "cold", k)
		for _, x := range loc.Extents {
			eg, _, _ := e.l.Egroup(ctx, x.Egroup)
			if eg.EC == nil || eg.EC.K != 4 || eg.EC.M != 2 || len(eg.Replicas) != 6 {
				t.Fatalf("%s: egroup %x not 4+2: %+v", k, x.Egroup, eg)
			}
			devs := map[model.DeviceID]bool{}
			for _, r := range eg.Replicas {
				devs[r.Device] = true
			}
			if len(devs) != 6 {
				t.Fatalf("strips on %d distinct devices, want 6", len(devs))
			}
			if ecID == 0 {
				ecID = x.Egroup
				physical = fileSize(eg) * 6
			}
		}
		e.mustRead("cold", k, want)
	}
	t.Logf("replicas hdd=3: %d bytes; 4+2 stripe holds %d (of which the logs compressed)", plainBytes, physical)
	// Lose any two strips (files deleted): reads reconstruct.
	eg, _, _ := e.l.Egroup(ctx, ecID)
	lost := []meta.EgroupReplica{eg.Replicas[0], eg.Replicas[4]}
	for _, r := range lost {
		os.Remove(filepath.Join(e.devPath(r.Device), extent.FileName(ecID)))
	}
	e.restart() // recovery marks the missing strips bad
	eg, _, _ = e.l.Egroup(ctx, ecID)
	nbad := 0
	for _, r := range eg.Replicas {
		if r.Bad {
			nbad++
		}
	}
	if nbad != 2 {
		t.Fatalf("after restart %d strips marked bad, want 2", nbad)
	}

	for k, want := range objs {
		e.mustRead("cold", k, want)
	}
	if bad, ok, err := e.l.VerifyStripe(ctx, ecID); err != nil || bad != 0 || ok {
		t.Errorf("verify degraded stripe: bad %d parity %v err %v (bad strips are already marked; parity not checkable)", bad, ok, err)
	}
	// Rebuild the two lost strips: one onto the free seventh device, one
	// in place (its device is fine, only the file was lost).
	eg, rev, _ := e.l.Egroup(ctx, ecID)
	used := map[model.DeviceID]bool{}
	for _, r := range eg.Replicas {
		used[r.Device] = true
	}
	var free model.Replica
	for i := 0; i < 7; i++ {
		if d := model.DeviceID(fmt.Sprintf("n1/hdd%d", i)); !used[d] {
			free = model.Replica{Device: d, Node: "n1", Tier: model.TierHDD}
		}
	}
	replace := map[model.DeviceID]model.Replica{lost[0].Device: free, lost[1].Device: lost[1].Replica()}
	if _, err := e.l.RebuildStrips(ctx, ecID, rev-1, replace); !errors.Is(err, ErrStale) {
		t.Fatalf("rebuild at an old revision: %v", err)
	}
	if _, err := e.l.RebuildStrips(ctx, ecID, rev, replace); err != nil {
		t.Fatal(err)
	}
	eg, _, _ = e.l.Egroup(ctx, ecID)
	if eg.Replicas[0].Device != free.Device || eg.Replicas[0].Bad || eg.Replicas[4].Bad {
		t.Fatalf("strips not rebuilt: %+v", eg.Replicas)
	}
	if bad, ok, err := e.l.VerifyStripe(ctx, ecID); err != nil || bad != 0 || !ok {
		t.Fatalf("rebuilt stripe: bad %d parity %v err %v", bad, ok, err)
	}
	for k, want := range objs {
		e.mustRead("cold", k, want)
	}
	// A flipped byte in a data strip: the read reconstructs and marks it.
	flip(t, filepath.Join(e.devPath(eg.Replicas[1].Device), extent.FileName(ecID)), extent.HeaderSize+7)
	e.restart()
	for k, want := range objs {
		e.mustRead("cold", k, want)
	}
	if eg, _, _ = e.l.Egroup(ctx, ecID); !eg.Replicas[1].Bad {
		t.Fatalf("corrupt data strip not marked bad: %+v", eg.Replicas)
	}
	// More strips lost than the code covers: reads fail, never lie.
	damaged := eg
	damaged.Replicas = append([]meta.EgroupReplica(nil), eg.Replicas...)
	for _, i := range []int{0, 2, 3} { // with strip 1 bad: four of six gone
		os.Remove(filepath.Join(e.devPath(eg.Replicas[i].Device), extent.FileName(ecID)))
	}
	e.restart()
	for k := range objs {
		if got, err := e.get("cold", k, 0, -1); err == nil {
			if loc, _ := e.l.Locate(ctx, "cold", k); loc.Extents[0].Egroup == ecID {
				t.Fatalf("%s read %d bytes with 4 of 6 strips gone", k, len(got))
			}
		}
	}
}

func TestErasureCodeBackToReplicasAndScrub(t *testing.T) {
	e := newEnv(t, sixDevices()...)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	a := payload(1, 700_000)
	e.put("cold", "a", a, "hdd=2")
	e.l.SealIdle(ctx, 0)
	res, err := e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), EC: transform.ECShape{K: 3, M: 2}, Sources: []RewriteSource{e.source(e.egroupOf("cold", "a"))}})
	if err != nil || res.Moved == 0 {
		t.Fatalf("encode: %+v %v", res, err)
	}
	id := e.egroupOf("cold", "a")
	if bad, ok, err := e.l.VerifyStripe(ctx, id); err != nil || bad != 0 || !ok {
		t.Fatalf("verify fresh stripe: bad %d parity %v err %v", bad, ok, err)
	}
	eg, _, _ := e.l.Egroup(ctx, id)
	flip(t, filepath.Join(e.devPath(eg.Replicas[3].Device), extent.FileName(id)), extent.HeaderSize+1)
	e.restart()
	if bad, _, err := e.l.VerifyStripe(ctx, id); err != nil || bad != 1 {
		t.Fatalf("verify with a corrupt parity strip: bad %d err %v", bad, err)
	}
	if eg, _, _ := e.l.Egroup(ctx, id); !eg.Replicas[3].Bad {
		t.Fatalf("corrupt parity strip not marked bad")
	}
	if _, err := e.l.TruncateEgroup(ctx, id, 0, 1); err == nil {
		t.Fatalf("truncating a stripe accepted")
	}
	// Back to replicas.
	res, err = e.l.Rewrite(ctx, RewriteRequest{Vector: model.MustParseVector("hdd=2"), Label: "ec-decode", Sources: []RewriteSource{e.source(id)}})
	if err != nil || res.Moved == 0 {
		t.Fatalf("decode: %+v %v", res, err)
	}
	back, _, _ := e.l.Egroup(ctx, e.egroupOf("cold", "a"))
	if back.EC != nil || len(back.Replicas) != 2 {
		t.Fatalf("decoded egroup: %+v", back)
	}
	e.mustRead("cold", "a", a)
	e.restart()
	e.mustRead("cold", "a", a)
}

func TestErasureCodeSettingMustFitDevices(t *testing.T) {
	e := newEnv(t, "hdd:h0:1GiB", "hdd:h1:1GiB", "hdd:h2:1GiB", "hdd:h3:1GiB", "hdd:h4:1GiB", "hdd:h5:1GiB")
	ctx := context.Background()
	e.l.CreateBucket(ctx, "cold", "", model.Vector{})
	for _, bad := range []string{"5+2", "4+0", "2+3", "9+1", "x"} {
		err := e.l.SetBucketTransform(ctx, "cold", meta.BucketTransform{EC: bad})
		if !errors.Is(err, ErrInvalidTransform) {
			t.Errorf("ec %q: %v, want ErrInvalidTransform", bad, err)
		}
		t.Logf("ec %s: %v", bad, err)
	}
	if err := e.l.SetBucketTransform(ctx, "cold", meta.BucketTransform{EC: "4+2"}); err != nil {
		t.Fatalf("4+2 on 6 devices: %v", err)
	}
	b, _, _ := e.l.GetBucket(ctx, "cold")
	if b.Transform == nil || b.Transform.EC != "4+2" {
		t.Fatalf("bucket transform %+v", b.Transform)
	}
}
