package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const crashWriters = 16

// crashSizes is the range of object sizes a crash test writes.
type crashSizes struct{ min, max int }

var (
	// mixedSizes: many small objects, some large.
	mixedSizes = crashSizes{1 << 10, 2 << 20}
	// batchedSizes: all small enough to share batched appends
	// (object.Options.BatchMaxBytes).
	batchedSizes = crashSizes{1 << 10, 64 << 10}
)

// crashContent is generation gen of key: log-uniform size in
// [sz.min, sz.max], bytes from the seed.
func crashContent(seed uint64, key string, gen int, sz crashSizes) []byte {
	r := rand.New(rand.NewPCG(seed, uint64(len(key))*31+uint64(gen)))
	for _, c := range []byte(key) {
		r = rand.New(rand.NewPCG(r.Uint64()^uint64(c), uint64(gen)))
	}
	u := r.Float64()
	size := int(float64(sz.min) * math.Pow(float64(sz.max)/float64(sz.min), u))
	return content(seed, key, gen, size, size)
}

// keyState tracks what the store may hold for one key. Keys are private to
// one writer, which writes them one PUT at a time, so at most one
// generation per key is in flight when the server dies.
type keyState struct {
	// valid are the generations the store may hold; -1 means absent.
	valid    []int
	nextGen  int
	inflight int // generation being written, or -1
}

type crashBook struct {
	mu    sync.Mutex
	keys  map[string]*keyState
	sizes crashSizes
}

func (b *crashBook) begin(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	if ks == nil {
		ks = &keyState{valid: []int{-1}, inflight: -1}
		b.keys[key] = ks
	}
	g := ks.nextGen
	ks.nextGen++
	ks.inflight = g
	return g
}

// ack records a 200: from now on the store must hold exactly this
// generation (until the next write of the key).
func (b *crashBook) ack(key string, gen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	ks.valid = []int{gen}
	ks.inflight = -1
}

// lost records a PUT that got no answer because the server died: it may or
// may not have committed.
func (b *crashBook) lost(key string, gen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ks := b.keys[key]
	ks.valid = append(ks.valid, gen)
	ks.inflight = -1
}

// TestCrashKill9UnderLoad kills the server with SIGKILL while 16 writers
// upload, restarts it on the same data dir and checks docs/design/0000 invariants 1
// and 2: every acknowledged object is byte-identical, and an object whose
// PUT was not acknowledged is either absent or complete — never partial.
// It repeats kill/restart three times; every round re-verifies all
// objects written so far and overwrites some of them.
func TestCrashKill9UnderLoad(t *testing.T) {
	testCrashKill9(t, mixedSizes, 3, false)
}

// TestCrashKill9MidBatch is the same with objects small enough that
// concurrent PUTs share egroup appends (docs/design/0012): the kill lands
// while batches are written and committed, after the server's metrics
// show batches of more than one write. Recovery must cut every replica to
// the same committed end, and every acknowledged object must read back.
func TestCrashKill9MidBatch(t *testing.T) {
	testCrashKill9(t, batchedSizes, 2, true)
}

func testCrashKill9(t *testing.T, sizes crashSizes, rounds int, wantBatches bool) {
	start := time.Now()
	dir := t.TempDir()
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":16GiB", "hdd:" + filepath.Join(dir, "hdd0") + ":16GiB"},
		vector:  "ssd=1,hdd=1",
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	srv := startServer(t, spec)
	if err := srv.client().createBucket("crash", ""); err != nil {
		t.Fatal(err)
	}
	book := &crashBook{keys: map[string]*keyState{}, sizes: sizes}
	var totalAcked, totalLost, totalPuts atomic.Int64
	for round := 0; round < rounds; round++ {
		c := srv.client()
		var killed atomic.Bool
		var ackedThisRound atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, crashWriters)
		for w := 0; w < crashWriters; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(round*crashWriters+w)))
				// Each writer keeps writing until the kill cuts a PUT off,
				// so the kill lands with every writer mid-request.
				for i := 0; ; i++ {
					var key string
					if i > 0 && rng.IntN(5) == 0 {
						// Overwrite one of this writer's earlier keys.
						r := rng.IntN(round + 1)
						key = fmt.Sprintf("w%02d/r%d/%05d", w, r, rng.IntN(max(1, i)))
						book.mu.Lock()
						_, ok := book.keys[key]
						book.mu.Unlock()
						if !ok {
							key = fmt.Sprintf("w%02d/r%d/%05d", w, round, i)
						}
					} else {
						key = fmt.Sprintf("w%02d/r%d/%05d", w, round, i)
					}
					gen := book.begin(key)
					data := crashContent(seed, key, gen, sizes)
					totalPuts.Add(1)
					err := c.put("crash", key, data)
					if err == nil {
						book.ack(key, gen)
						ackedThisRound.Add(1)
						totalAcked.Add(1)
						continue
					}
					// No answer: acceptable only because the server was killed.
					book.lost(key, gen)
					totalLost.Add(1)
					if !killed.Load() || !isConnErr(err) {
						errc <- fmt.Errorf("PUT %s (%d bytes) failed while the server was up: %w", key, len(data), err)
					}
					return
				}
			}()
		}
		// Let the load run for a random while, but make sure some writes
		// were acknowledged so that the kill lands mid-stream.
		loadFor := time.Duration(800+rand.IntN(1200)) * time.Millisecond
		deadline := time.Now().Add(20 * time.Second)
		time.Sleep(loadFor)
		for ackedThisRound.Load() < 2*crashWriters && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		for wantBatches {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no batch of more than one write before the deadline", round)
			}
			// Batches of more than one write: the mean is above one.
			sum, err1 := c.metric("terrace_object_append_batch_writes_sum")
			n, err2 := c.metric("terrace_object_append_batch_writes_count")
			if err1 != nil || err2 != nil {
				t.Fatalf("batch metrics: %v %v", err1, err2)
			}
			if n > 0 && sum > n {
				t.Logf("round %d: %.0f writes in %.0f batches before the kill", round, sum, n)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		killed.Store(true)
		srv.kill()
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		t.Logf("round %d: killed after %s, %d PUTs acknowledged this round", round, loadFor, ackedThisRound.Load())

		srv = startServer(t, spec)
		rep := srv.recoveryReport()
		t.Logf("round %d: recovery %v", round, rep)
		if rep["damaged"] != 0 || rep["missing"] != 0 {
			// A killed process loses no page-cache data, so no replica may
			// be shorter than its committed length.
			t.Errorf("round %d: recovery found damaged/missing replicas after kill -9: %v", round, rep)
		}
		verifyCrashBook(t, srv.client(), seed, book)
		if t.Failed() {
			t.Fatalf("round %d failed; server log:\n%s", round, tail(srv.log(), 4000))
		}
	}
	t.Logf("%d PUTs: %d acknowledged, %d unanswered (killed); %d keys", totalPuts.Load(), totalAcked.Load(), totalLost.Load(), len(book.keys))

	// The tier report works after recovery, and it agrees with the files:
	// each device's used bytes are its live egroups' committed bytes (plus
	// the small device identity file) — recovery left no torn tails and no
	// orphan files behind.
	c := srv.client()
	rep, err := c.report()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range rep.Devices {
		t.Logf("device %s: used %d, %d egroups, %d egroup bytes, %d bad", d.ID, d.UsedBytes, d.Egroups, d.EgroupBytes, d.BadReplicas)
		if d.BadReplicas != 0 {
			t.Errorf("device %s has %d bad replicas after clean recovery", d.ID, d.BadReplicas)
		}
		if slack := d.UsedBytes - d.EgroupBytes; slack < 0 || slack > 4096 {
			t.Errorf("device %s: used %d bytes but live egroups hold %d (difference %d)", d.ID, d.UsedBytes, d.EgroupBytes, slack)
		}
	}
	out, err := srv.cli("tier", "report")
	if err != nil || !strings.Contains(out, "ssd") || !strings.Contains(out, "hdd") {
		t.Errorf("terrace tier report: %v\n%s", err, out)
	}
	// Every acknowledged object sits on both tiers.
	n := 0
	for key, ks := range book.keys {
		if n == 20 {
			break
		}
		if ks.valid[0] < 0 {
			continue
		}
		n++
		loc, err := c.locate("crash", key)
		if err != nil {
			t.Errorf("locate %s: %v", key, err)
			continue
		}
		if loc.Tiers["ssd"] == 0 || loc.Tiers["hdd"] == 0 {
			t.Errorf("locate %s: tiers %v, want ssd and hdd", key, loc.Tiers)
		}
	}
	out, err = srv.cli("object", "locate", "crash/"+firstKey(book))
	if err != nil {
		t.Errorf("terrace object locate: %v\n%s", err, out)
	}
	t.Logf("crash test took %s", time.Since(start).Round(time.Millisecond))
}

func firstKey(b *crashBook) string {
	for k, ks := range b.keys {
		if len(ks.valid) == 1 && ks.valid[0] >= 0 {
			return k
		}
	}
	return ""
}

// verifyCrashBook reads every key the test ever wrote and every key the
// server lists, checks each against the generations it may hold, and
// narrows the book to what was found.
func verifyCrashBook(t *testing.T, c *client, seed uint64, book *crashBook) {
	t.Helper()
	book.mu.Lock()
	defer book.mu.Unlock()
	keys := make([]string, 0, len(book.keys))
	for k := range book.keys {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	type result struct {
		key string
		gen int
		err error
	}
	work := make(chan string)
	results := make(chan result)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range work {
				ks := book.keys[key]
				gen, err := checkKey(c, seed, key, ks.valid, book.sizes)
				results <- result{key, gen, err}
			}
		}()
	}
	go func() {
		for _, k := range keys {
			work <- k
		}
		close(work)
		wg.Wait()
		close(results)
	}()
	present := map[string]bool{}
	var raced, committed int
	for r := range results {
		if r.err != nil {
			t.Error(r.err)
			continue
		}
		if v := book.keys[r.key].valid; len(v) > 1 {
			// A PUT that raced the kill: it committed or vanished whole.
			raced++
			if r.gen == v[len(v)-1] {
				committed++
			}
		}
		book.keys[r.key].valid = []int{r.gen}
		if r.gen >= 0 {
			present[r.key] = true
		}
	}
	t.Logf("verified %d keys (%d present); of %d PUTs cut off by the kill, %d had committed and were complete, %d left no trace",
		len(keys), len(present), raced, committed, raced-committed)
	// The listing shows exactly the present keys: nothing the test did
	// not write, nothing half-visible.
	listed := map[string]int64{}
	after := ""
	for {
		var page struct {
			Objects []struct {
				Key  string `json:"key"`
				Size int64  `json:"size"`
			} `json:"objects"`
			Truncated bool   `json:"truncated"`
			Next      string `json:"next"`
		}
		if err := c.json("GET", "/v1/data/crash", url.Values{"after": {after}, "max": {"1000"}}, nil, &page); err != nil {
			t.Fatalf("list: %v", err)
		}
		for _, o := range page.Objects {
			listed[o.Key] = o.Size
		}
		if !page.Truncated {
			break
		}
		after = page.Next
	}
	for k, size := range listed {
		ks, ok := book.keys[k]
		if !ok {
			t.Errorf("listed key %s was never written", k)
			continue
		}
		if !present[k] {
			t.Errorf("listed key %s is not readable", k)
			continue
		}
		if want := len(crashContent(seed, k, ks.valid[0], book.sizes)); size != int64(want) {
			t.Errorf("listed key %s: size %d, want %d", k, size, want)
		}
	}
	for k := range present {
		if _, ok := listed[k]; !ok {
			t.Errorf("key %s readable but not listed", k)
		}
	}
}

// checkKey reads key and returns which valid generation it holds (-1:
// absent), or an error if it holds anything else.
func checkKey(c *client, seed uint64, key string, valid []int, sizes crashSizes) (int, error) {
	got, err := c.get("crash", key)
	var ae *apiErr
	if errors.As(err, &ae) && ae.Status == 404 && ae.Code == "NoSuchKey" {
		for _, g := range valid {
			if g == -1 {
				return -1, nil
			}
		}
		return 0, fmt.Errorf("acknowledged object %s (generation %v) is missing", key, valid)
	}
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", key, err)
	}
	var desc []string
	for _, g := range valid {
		if g < 0 {
			continue
		}
		want := crashContent(seed, key, g, sizes)
		if bytes.Equal(got, want) {
			return g, nil
		}
		desc = append(desc, fmt.Sprintf("gen %d: %s", g, diff(got, want)))
	}
	return 0, fmt.Errorf("object %s (may hold generations %v) has wrong bytes: %s", key, valid, strings.Join(desc, "; "))
}

func diff(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("%d bytes, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	return "equal"
}

func isConnErr(err error) bool {
	var ae *apiErr
	return err != nil && !errors.As(err, &ae)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
