package object

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

var (
	historySeeds = flag.Int("history-seeds", 40, "seeds TestHistoryAgainstAModel runs")
	historySteps = flag.Int("history-steps", 60, "steps of each TestHistoryAgainstAModel run")
)

// histModelVersion is one S3 version of a key in the model: its ID and
// body ("<marker>" for a delete marker).
type histModelVersion struct{ id, body string }

// histModel is what S3 and snapshots must show: per key its versions,
// newest first (an unversioned bucket holds at most the "null" one), and
// per snapshot the bodies it froze.
type histModel struct {
	versioning string // "", Enabled, Suspended
	keys       map[string][]histModelVersion
	snaps      map[string]map[string]string // name -> key -> body
}

// current is what a read of key shows now ("<absent>" for none or a
// delete marker: snapshots and the live bucket agree on that).
func (m *histModel) current(key string) string {
	vs := m.keys[key]
	if len(vs) == 0 || vs[0].body == "<marker>" {
		return "<absent>"
	}
	return vs[0].body
}

// write records a put (body) or a delete ("<marker>") that the layer
// answered with version id.
func (m *histModel) write(key, body, id string) {
	vs := m.keys[key]
	switch m.versioning {
	case "":
		vs = nil
		if body != "<marker>" {
			vs = []histModelVersion{{NullVersion, body}}
		}
	case VersioningSuspended:
		vs = slices.DeleteFunc(vs, func(v histModelVersion) bool { return v.id == NullVersion })
		vs = append([]histModelVersion{{NullVersion, body}}, vs...)
	default:
		vs = append([]histModelVersion{{id, body}}, vs...)
	}
	m.keys[key] = vs
}

// TestHistoryAgainstAModel runs seeded random sequences of writes,
// deletes (plain, by version ID, by lifecycle expiry), tag changes,
// replica and class changes, versioning changes, snapshots taken and
// deleted, and version collection, on one bucket, and checks after every
// step that the live bucket, every snapshot and the S3 version listing
// show exactly what a model of S3 versions and point-in-time snapshots
// says. The history bugs this found or guards against are each also a
// focused test in history_race_test.go.
func TestHistoryAgainstAModel(t *testing.T) {
	for seed := range uint64(*historySeeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			runHistoryModel(t, seed, *historySteps)
		})
	}
}

func runHistoryModel(t *testing.T, seed uint64, steps int) {
	e := newEnv(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 7))
	if err := e.l.CreateBucket(ctx, "bkt", "", model.MustParseVector("ssd=1,hdd=1")); err != nil {
		t.Fatal(err)
	}
	models := map[string]*histModel{"bkt": {keys: map[string][]histModelVersion{}, snaps: map[string]map[string]string{}}}
	keys := []string{"a", "b", "c"}
	gen := 0
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d after:\n  %s\n%s", seed, strings.Join(trace, "\n  "), fmt.Sprintf(format, args...))
	}
	always := func(ObjectInfo) bool { return true }
	for step := 0; step < steps; step++ {
		key := keys[rng.IntN(len(keys))]
		// Most steps act on the bucket; once a clone exists, some on it
		// (it takes writes, deletes, snapshots and reductions; its S3
		// versions are not modelled).
		bkt, clone := "bkt", false
		if _, ok := models["cln"]; ok && rng.IntN(3) == 0 {
			bkt, clone = "cln", true
		}
		m := models[bkt]
		switch op := rng.IntN(21); {
		case op < 6: // put
			gen++
			body := fmt.Sprintf("%s%d", key, gen)
			info := e.putS(bkt, key, body)
			m.write(key, body, info.VersionID)
			trace = append(trace, bkt+": put "+key+" "+body)
		case op < 8: // delete
			res, err := e.l.DeleteObject(ctx, bkt, key, "")
			if err != nil {
				fail("delete %s: %v", key, err)
			}
			if m.versioning != "" || len(m.keys[key]) > 0 {
				m.write(key, "<marker>", res.VersionID)
			}
			trace = append(trace, bkt+": delete "+key)
		case op < 10: // delete a version by ID
			vs := m.keys[key]
			if clone || len(vs) == 0 {
				continue
			}
			v := vs[rng.IntN(len(vs))]
			if _, err := e.l.DeleteObject(ctx, bkt, key, v.id); err != nil {
				fail("delete %s version %s: %v", key, v.id, err)
			}
			m.keys[key] = slices.DeleteFunc(vs, func(x histModelVersion) bool { return x.id == v.id })
			trace = append(trace, bkt+": delete "+key+" version "+v.id)
		case op < 11: // lifecycle expiry of the current version
			if clone {
				continue
			}
			ok, err := e.l.DeleteIf(ctx, bkt, key, always)
			if err != nil {
				fail("expire %s: %v", key, err)
			}
			if want := m.current(key) != "<absent>"; ok != want {
				fail("expire %s deleted %v, want %v", key, ok, want)
			}
			if ok {
				// The layer's answer carries no version: take the
				// marker's from the listing.
				id := ""
				if m.versioning == VersioningEnabled {
					res, err := e.l.ListVersions(ctx, bkt, VersionListOptions{Prefix: key, MaxKeys: 1})
					if err != nil || len(res.Versions) == 0 {
						fail("list after expiry: %v", err)
					}
					id = res.Versions[0].VersionID
				}
				m.write(key, "<marker>", id)
			}
			trace = append(trace, bkt+": expire "+key)
		case op < 12: // tags
			err := e.l.UpdateObject(ctx, bkt, key, func(o *meta.Object) error {
				o.Tags = map[string]string{"step": fmt.Sprint(step)}
				return nil
			})
			if err != nil && m.current(key) != "<absent>" {
				fail("tag %s: %v", key, err)
			}
			trace = append(trace, bkt+": tag "+key)
		case op < 13: // replicas or class
			if clone || m.current(key) == "<absent>" {
				continue
			}
			var done <-chan error
			var err error
			if rng.IntN(2) == 0 {
				v := []string{"hdd=2", "ssd=1,hdd=1"}[rng.IntN(2)]
				done, err = e.l.SetReplication(ctx, bkt, key, model.MustParseVector(v))
				trace = append(trace, bkt+": replicas "+key+" "+v)
			} else {
				class := []string{"STANDARD_IA", "GLACIER_IR", "EXPRESS_ONEZONE"}[rng.IntN(3)]
				done, _, err = e.l.Transition(ctx, bkt, key, class, always)
				trace = append(trace, bkt+": class "+key+" "+class)
			}
			if err != nil {
				fail("rewrite %s: %v", key, err)
			}
			if done != nil {
				if err := <-done; err != nil {
					fail("rewrite %s: %v", key, err)
				}
			}
		case op < 14: // versioning
			if clone {
				continue
			}
			state := VersioningEnabled
			if m.versioning == VersioningEnabled && rng.IntN(2) == 0 {
				state = VersioningSuspended
			}
			if err := e.l.SetVersioning(ctx, bkt, state); err != nil {
				fail("versioning %s: %v", state, err)
			}
			m.versioning = state
			trace = append(trace, bkt+": versioning "+state)
		case op < 17: // snapshot
			name := fmt.Sprintf("s%d", step)
			if _, err := e.l.CreateSnapshot(ctx, bkt, name); err != nil {
				fail("snapshot: %v", err)
			}
			m.snaps[name] = m.frozen(keys)
			trace = append(trace, bkt+": snapshot "+name)
		case op < 18: // delete a snapshot
			if len(m.snaps) == 0 {
				continue
			}
			names := make([]string, 0, len(m.snaps))
			for n := range m.snaps {
				names = append(names, n)
			}
			slices.Sort(names)
			name := names[rng.IntN(len(names))]
			if err := e.l.DeleteSnapshot(ctx, bkt, name); err != nil {
				fail("delete snapshot %s: %v", name, err)
			}
			delete(m.snaps, name)
			trace = append(trace, bkt+": delete snapshot "+name)
		case op < 19: // clone the bucket (now or as of a snapshot), or reduce the clone
			if _, ok := models["cln"]; ok {
				budget := 1 + rng.IntN(3)
				if _, _, err := e.l.ReduceClone(ctx, "cln", budget); err != nil {
					fail("reduce: %v", err)
				}
				trace = append(trace, fmt.Sprintf("cln: reduce (budget %d)", budget))
				break
			}
			base := models["bkt"]
			from, frozen := "", base.frozen(keys)
			if len(base.snaps) > 0 && rng.IntN(2) == 0 {
				for n := range base.snaps {
					if from == "" || n < from {
						from = n
					}
				}
				frozen = base.snaps[from]
			}
			if _, err := e.l.Clone(ctx, "bkt", from, "cln"); err != nil {
				fail("clone: %v", err)
			}
			c := &histModel{versioning: base.versioning, keys: map[string][]histModelVersion{}, snaps: map[string]map[string]string{}}
			for k, body := range frozen {
				if body != "<absent>" {
					c.keys[k] = []histModelVersion{{"", body}}
				}
			}
			models["cln"] = c
			trace = append(trace, "bkt: clone as cln (snapshot "+from+")")
		default: // collection
			for _, k := range keys {
				if _, err := e.l.CollectVersions(ctx, bkt, k); err != nil {
					fail("collect %s: %v", k, err)
				}
			}
			trace = append(trace, bkt+": collect")
		}
		for name, m := range models {
			checkHistoryModel(e, m, name, keys, name == "bkt", fail)
		}
	}
}

// frozen is what a snapshot taken now must show.
func (m *histModel) frozen(keys []string) map[string]string {
	out := map[string]string{}
	for _, k := range keys {
		out[k] = m.current(k)
	}
	return out
}

func checkHistoryModel(e *env, m *histModel, bkt string, keys []string, versions bool, fail func(string, ...any)) {
	absent := func(s string) string {
		if s == "<marker>" {
			return "<absent>"
		}
		return s
	}
	for _, k := range keys {
		if got, want := absent(e.read(bkt, k, "")), m.current(k); got != want {
			fail("%s: live %s reads %q, want %q", bkt, k, got, want)
		}
		if versions {
			var want []string
			for _, v := range m.keys[k] {
				want = append(want, v.id+"="+v.body)
			}
			if got := e.versionsOf(bkt, k); got != strings.Join(want, ",") {
				fail("%s: versions of %s: %q, want %q", bkt, k, got, strings.Join(want, ","))
			}
		}
		for name, frozen := range m.snaps {
			if got := absent(e.read(bkt+snapSep+name, k, "")); got != frozen[k] {
				fail("%s: snapshot %s reads %s as %q, want %q", bkt, name, k, got, frozen[k])
			}
		}
	}
}

// BenchmarkDeletePlain is a delete in a bucket without snapshots: the
// object record's removal, and the range read of the key's history that
// decides whether a tombstone must end it.
func BenchmarkDeletePlain(b *testing.B) {
	e := newEnv(b)
	ctx := context.Background()
	e.l.CreateBucket(ctx, "plain", "", model.Vector{})
	keys := make([]string, b.N)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%08d", i)
		if _, err := e.l.Put(ctx, "plain", keys[i], strings.NewReader("x"), PutOptions{Size: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for _, k := range keys {
		if err := e.l.Delete(ctx, "plain", k); err != nil {
			b.Fatal(err)
		}
	}
}
