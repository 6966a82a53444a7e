package policy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// newLayer is a real single-node object layer on Pebble and two
// directory devices.
func newLayer(t *testing.T) (*object.Layer, meta.KV) {
	t.Helper()
	dir := t.TempDir()
	var devs []*device.Device
	for i, tier := range []string{"ssd", "hdd"} {
		sp, err := device.ParseSpec(fmt.Sprintf("%s:%s:1GiB", tier, filepath.Join(dir, tier)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := device.Open(model.DeviceID(fmt.Sprintf("n1/%s%d", tier, i)), sp)
		if err != nil {
			t.Fatal(err)
		}
		d.SetThroughput(100e6, 100e6)
		devs = append(devs, d)
	}
	kv, err := meta.OpenPebble(filepath.Join(dir, "meta"))
	if err != nil {
		t.Fatal(err)
	}
	local := object.NewLocal("n1", "r1", devs)
	pol, _ := placement.New(placement.Config{Name: "uniform"})
	l, err := object.New(kv, local, local, object.Options{Policy: pol, StatsInterval: 1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); kv.Close() })
	if err := l.CreateBucket(context.Background(), "bkt", "", model.MustParseVector("any=1")); err != nil {
		t.Fatal(err)
	}
	return l, kv
}

func example(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../examples/policies/" + name + ".lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func readAll(t *testing.T, l *object.Layer, key string) string {
	t.Helper()
	_, rc, err := l.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestCounterIncrFromConcurrentClients: two clients increment one counter
// 100 times each; compare-and-swap with retry loses no update and every
// client sees a distinct value.
func TestCounterIncrFromConcurrentClients(t *testing.T) {
	l, kv := newLayer(t)
	m := newManager(t, kv, "n1")
	put(t, m, "counter", HookClass, example(t, "counter"))
	ctx := context.Background()
	const clients, each = 2, 100
	var mu sync.Mutex
	var seen []int
	retries := 0
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "visits", Class: "counter", Method: "incr"})
				if err != nil {
					errs <- err
					return
				}
				var n int
				fmt.Sscan(res.Text, &n)
				mu.Lock()
				seen = append(seen, n)
				retries += res.Attempts - 1
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := readAll(t, l, "visits"); got != "200" {
		t.Fatalf("counter = %q, want 200", got)
	}
	sort.Ints(seen)
	for i, n := range seen {
		if n != i+1 {
			t.Fatalf("results %v...: value %d returned twice or skipped", seen[:min(len(seen), 10)], i+1)
		}
	}
	t.Logf("%d increments, %d retries after lost races", clients*each, retries)
	res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "visits", Class: "counter", Method: "incr", Arg: "10"})
	if err != nil || res.Text != "210" || !res.Wrote {
		t.Fatalf("incr 10: %+v %v", res, err)
	}
	res, err = m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "visits", Class: "counter", Method: "get"})
	if err != nil || res.Text != "210" || res.Wrote {
		t.Fatalf("get: %+v %v", res, err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "visits", Class: "counter", Method: "incr", Arg: "many"}); err == nil || !strings.Contains(err.Error(), "must be a number") {
		t.Fatalf("bad argument: %v", err)
	}
}

func TestAppendAndChecksumClasses(t *testing.T) {
	l, kv := newLayer(t)
	m := newManager(t, kv, "n1")
	put(t, m, "append", HookClass, example(t, "append"))
	put(t, m, "checksum", HookClass, example(t, "checksum"))
	ctx := context.Background()
	for i, line := range []string{"alice logged in", "bob logged out", "carol: 3 files"} {
		res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "audit", Class: "append", Method: "record", Arg: line})
		if err != nil || res.Text != fmt.Sprint(i+1) {
			t.Fatalf("record %d: %+v %v", i, res, err)
		}
	}
	if got := readAll(t, l, "audit"); got != "1\talice logged in\n2\tbob logged out\n3\tcarol: 3 files\n" {
		t.Fatalf("log = %q", got)
	}
	if res, _ := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "audit", Class: "append", Method: "last"}); res.Text != "carol: 3 files" {
		t.Fatalf("last = %q", res.Text)
	}
	data := bytes.Repeat([]byte("terrace "), 100_000)
	if _, err := l.Put(ctx, "bkt", "blob", bytes.NewReader(data), object.PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "blob", Class: "checksum", Method: "sha256"})
	if err != nil || res.Text != hex.EncodeToString(sum[:]) || res.Wrote {
		t.Fatalf("sha256: %+v %v", res, err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "nope", Class: "checksum", Method: "sha256"}); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("sha256 of a missing object: %v", err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "blob", Class: "checksum", Method: "md5"}); !errors.Is(err, ErrNoSuchMethod) {
		t.Fatalf("missing method: %v", err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "blob", Class: "nope", Method: "x"}); !errors.Is(err, ErrNoSuchClass) {
		t.Fatalf("missing class: %v", err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "nobucket", Key: "k", Class: "append", Method: "record", Arg: "x"}); !errors.Is(err, object.ErrNoSuchBucket) {
		t.Fatalf("missing bucket: %v", err)
	}
	put(t, m, "kv", HookClass, example(t, "class_kv"))
	for _, step := range []struct{ method, arg, want string }{
		{"set", "mode=fast", "fast"}, {"set", "zone=a", "a"}, {"get", "mode", "fast"},
		{"keys", "", `["mode","zone"]`}, {"del", "mode", "true"}, {"get", "mode", ""}, {"keys", "", `["zone"]`},
	} {
		res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "config", Class: "kv", Method: step.method, Arg: step.arg})
		if err != nil || res.Text != step.want {
			t.Fatalf("kv.%s %s: %q %v, want %q", step.method, step.arg, res.Text, err, step.want)
		}
	}
	big := bytes.Repeat([]byte("x"), MaxClassObjectBytes+1)
	if _, err := l.Put(ctx, "bkt", "big", bytes.NewReader(big), object.PutOptions{Size: int64(len(big))}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "big", Class: "checksum", Method: "sha256"}); !errors.Is(err, ErrObjectSize) {
		t.Fatalf("oversized object: %v", err)
	}
}

// TestClassThatSpinsIsDisabled: a method that loops only on some input
// passes validation, then fails by budget, and is disabled after three
// failures, while ordinary errors from the method are its answers.
func TestClassThatSpinsIsDisabled(t *testing.T) {
	l, kv := newLayer(t)
	m := NewManager(kv, Options{Node: "n1", Logger: quiet, LimitsFor: func(h Hook) sandbox.Limits {
		lim := h.Limits()
		lim.Instructions = 200_000
		return lim
	}})
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	put(t, m, "tricky", HookClass, `
function run(obj, arg)
  if arg == "spin" then while true do end end
  if arg == "fail" then error("refused") end
  obj:write(arg or "")
  return "ok"
end`)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "tricky", Method: "run", Arg: "fail"}); err == nil {
			t.Fatal("error() not returned")
		}
	}
	if res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "tricky", Method: "run", Arg: "x"}); err != nil || res.Text != "ok" {
		t.Fatalf("runtime errors must not disable a class: %+v %v", res, err)
	}
	for i := 0; i < 3; i++ {
		_, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "tricky", Method: "run", Arg: "spin"})
		if k := sandbox.KindOf(err); k != sandbox.KindBudget && k != sandbox.KindDeadline {
			t.Fatalf("spin %d: %v", i, err)
		}
	}
	if _, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "tricky", Method: "run", Arg: "x"}); err == nil || !strings.Contains(err.Error(), "disabled") {
		t.Fatalf("after three overruns: %v", err)
	}
	if got := readAll(t, l, "k"); got != "x" {
		t.Fatalf("object = %q", got)
	}
	// Dry runs write nothing.
	put(t, m, "tricky", HookClass, `function run(obj, arg) obj:write("changed") return "ok" end`)
	rep, err := m.Test(ctx, TestRequest{Name: "tricky", Bucket: "bkt", Key: "k", Method: "run"}, Env{Store: l})
	if err != nil || !strings.Contains(rep.Text, "ok") {
		t.Fatalf("test: %+v %v", rep, err)
	}
	if got := readAll(t, l, "k"); got != "x" {
		t.Fatalf("a dry run wrote: %q", got)
	}
}

// TestExecResultTextIsBoundedByTheStringLimit: a method's result is
// printed as JSON; a table holding one 64 KiB string 2000 times would
// print as 125 MiB (with 100 000 items of 8 MiB, 800 GB) though the method
// never built a string over the limit. It fails as a wrong result, before
// anything is built or written; a small table still prints.
func TestExecResultTextIsBoundedByTheStringLimit(t *testing.T) {
	l, kv := newLayer(t)
	m := newManager(t, kv, "n1")
	put(t, m, "big", HookClass, `
function blow(obj)
  obj:write("blown")
  local s = string.rep("x", 65536)
  local t = {}
  for i = 1, 2000 do t[i] = s end
  return t
end
function small(obj) return {n = 1, s = "<ok>"} end`)
	ctx := context.Background()
	var ms1, ms2 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	res, err := m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "big", Method: "blow"})
	runtime.ReadMemStats(&ms2)
	if alloc := ms2.TotalAlloc - ms1.TotalAlloc; alloc > 64<<20 {
		t.Fatalf("exec allocated %d MiB for a result it must refuse", alloc>>20)
	}
	if sandbox.KindOf(err) != sandbox.KindType || !strings.Contains(err.Error(), "over the class string limit") {
		t.Fatalf("want a type error naming the limit, got %v (text of %d bytes)", err, len(res.Text))
	}
	if res.Wrote || res.Text != "" || res.Result != nil {
		t.Fatalf("refused result still returned or written: wrote=%v text=%d bytes", res.Wrote, len(res.Text))
	}
	if _, _, err := l.Get(ctx, "bkt", "k", 0, -1); !errors.Is(err, object.ErrNoSuchKey) {
		t.Fatalf("the refused method's write was kept: %v", err)
	}
	res, err = m.Exec(ctx, l, ExecRequest{Bucket: "bkt", Key: "k", Class: "big", Method: "small"})
	if err != nil || res.Text != `{"n":1,"s":"\u003cok\u003e"}` {
		t.Fatalf("small table: %q %v", res.Text, err)
	}
}
