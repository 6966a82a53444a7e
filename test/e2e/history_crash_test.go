package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The history crash test: snapshots, clones, snapshot tree reduction and
// garbage collection run while writers overwrite and delete, and the node
// is killed with SIGKILL at a random moment, several times. After every
// restart each view must be exactly a point in time:
//
//   - every snapshot and clone whose creation was acknowledged exists, and
//     shows for every key a generation that was current at some instant
//     between the start and the end of its creation call (not older than
//     the last write acknowledged before the call, not newer than the
//     last write begun before it answered);
//   - a view whose creation was cut by the kill is absent or passes the
//     same check (the end of its window is the kill);
//   - every listed key reads back byte-identical — garbage collection
//     freed nothing a view still reaches;
//   - the live bucket holds every acknowledged write (docs/design/0000
//     invariants 1 and 2).
//
// At the end two full Curator scans run and everything is checked again,
// with no dangling reference.

const (
	histWriters   = 4
	histKeys      = 12 // per writer
	histRounds    = 3
	histMaxViews  = 6 // snapshots kept before the oldest is removed
	histMinSize   = 1 << 10
	histMaxSize   = 96 << 10
	histDeleteOne = 6 // one write in histDeleteOne is a delete
)

// histGen is one write of a key: a PUT of content(gen) or a delete.
type histGen struct {
	deleted bool
	begun   time.Time
	acked   time.Time // zero: unanswered (the node was killed)
}

// histBook is every key's write history. Keys are private to one writer
// that writes one at a time, so a key's generations are ordered.
type histBook struct {
	mu   sync.Mutex
	gens map[string][]histGen // index = generation; gen -1 = never written
}

func (b *histBook) begin(key string, deleted bool) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gens[key] = append(b.gens[key], histGen{deleted: deleted, begun: time.Now()})
	return len(b.gens[key]) - 1
}

func (b *histBook) ack(key string, gen int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.gens[key][gen].acked = time.Now()
}

// window returns the generations a view taken during [start, end] may show
// for key: from the last one acknowledged before start (-1: none, the key
// never existed) to the last one begun before end. A generation that was
// never acknowledged may have failed to commit; the view then shows the
// one before it, which is in the range too.
func (b *histBook) window(key string, start, end time.Time) (lo, hi int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lo, hi = -1, -1
	for g, h := range b.gens[key] {
		if !h.acked.IsZero() && h.acked.Before(start) {
			lo = g
		}
		if h.begun.Before(end) {
			hi = g
		}
	}
	return lo, hi
}

// describe lists key's generations with their times relative to a view
// taken during [start, end], for a failure message.
func (b *histBook) describe(key string, start, end time.Time) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var sb strings.Builder
	fmt.Fprintf(&sb, "    view window %s (start) .. %+.3fs (end)\n", start.Format("15:04:05.000"), end.Sub(start).Seconds())
	for g, h := range b.gens[key] {
		what := "put"
		if h.deleted {
			what = "delete"
		}
		acked := "unacknowledged"
		if !h.acked.IsZero() {
			acked = fmt.Sprintf("acked %+.3fs", h.acked.Sub(start).Seconds())
		}
		fmt.Fprintf(&sb, "    gen %d %s begun %+.3fs %s\n", g, what, h.begun.Sub(start).Seconds(), acked)
	}
	return sb.String()
}

func (b *histBook) keys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.gens))
	for k := range b.gens {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// histView is a snapshot or clone the test made, with its creation window.
type histView struct {
	name       string // the bucket it is read as
	kind       string // snapshot, clone, clone-of-snapshot
	snapshot   string // snapshot name (kind snapshot)
	start, end time.Time
	acked      bool
	removed    bool // a remove was acknowledged
	removing   bool // a remove was cut by the kill
}

func TestCrashKill9History(t *testing.T) {
	dir := t.TempDir()
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":4GiB", "hdd:" + filepath.Join(dir, "hdd0") + ":4GiB"},
		vector:  "ssd=1,hdd=1",
		// GC reclaims quickly, so a collection during the test frees real
		// bytes; scheduled scans are left to the test.
		config: "curator:\n  garbage_grace: 1s\n  partial_every: 1h\n  full_every: 1h\n",
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	srv := startServer(t, spec)
	const live = "hist"
	if err := srv.client().createBucket(live, ""); err != nil {
		t.Fatal(err)
	}
	book := &histBook{gens: map[string][]histGen{}}
	var views []*histView
	var viewSeq int
	ops := map[string]int{}

	for round := 0; round < histRounds; round++ {
		c := srv.client()
		var killed atomic.Bool
		var wg sync.WaitGroup
		var slowest time.Duration
		errc := make(chan error, histWriters+1)
		for w := 0; w < histWriters; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, uint64(round*histWriters+w)))
				for !killed.Load() {
					key := fmt.Sprintf("w%d/%02d", w, rng.IntN(histKeys))
					del := rng.IntN(histDeleteOne) == 0
					gen := book.begin(key, del)
					var err error
					if del {
						err = c.del(live, key)
						var ae *apiErr
						if errors.As(err, &ae) && ae.Status == 404 {
							err = nil
						}
					} else {
						err = c.put(live, key, content(seed, key, gen, histMinSize, histMaxSize))
					}
					if err == nil {
						book.ack(key, gen)
						continue
					}
					if !killed.Load() || !isConnErr(err) {
						errc <- fmt.Errorf("write %s gen %d failed while the node was up: %w", key, gen, err)
					}
					return
				}
			}()
		}
		// The operator: snapshots, clones, reductions, removals and full
		// scans, one at a time, as fast as they answer.
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(1000+round)))
			for !killed.Load() {
				opStart := time.Now()
				err := histOp(c, rng, live, &views, &viewSeq, ops)
				if d := time.Since(opStart); d > slowest {
					slowest = d
				}
				if err != nil && !(killed.Load() && isConnErr(err)) {
					errc <- err
					return
				}
				if err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Duration(1500+rand.IntN(2000)) * time.Millisecond)
		killed.Store(true)
		killedAt := time.Now()
		srv.kill()
		wg.Wait()
		close(errc)
		for err := range errc {
			t.Error(err)
		}
		for _, v := range views {
			if !v.acked && v.end.IsZero() {
				v.end = killedAt
			}
		}
		srv = startServer(t, spec)
		verifyHistory(t, srv.client(), seed, live, book, views)
		if t.Failed() {
			t.Fatalf("round %d failed; server log:\n%s", round, tail(srv.log(), 4000))
		}
		t.Logf("round %d: %d views, ops so far %v, slowest op %s", round, len(views), ops, slowest)
	}

	c := srv.client()
	// A full job executes tasks for up to its time limit (a minute), and
	// backs off to 1 % of its byte rate while clients are slow: on a
	// loaded machine the first job after a restart, verifying egroups
	// it truncates, used all of it, as long as the client's timeout.
	scan := srv.client()
	scan.hc.Timeout = 4 * time.Minute
	for i := 0; i < 2; i++ {
		if err := scan.json("POST", "/v1/curator/run", url.Values{"kind": {"full"}, "wait": {"1"}}, nil, nil); err != nil {
			t.Fatalf("final scan %d: %v; %s; server log:\n%s", i, err, diagnoseStuck(t, c), tail(srv.log(), 6000))
		}
		time.Sleep(1100 * time.Millisecond) // past garbage_grace: the second scan frees
	}
	verifyHistory(t, c, seed, live, book, views)
	if d, err := c.metric("terrace_curator_dangling_references"); err != nil || d != 0 {
		t.Fatalf("dangling references after the final scans: %v %v", d, err)
	}
	if ops["snapshot"] == 0 || ops["clone"] == 0 || ops["reduce"] == 0 || ops["gc"] == 0 {
		t.Fatalf("not every kind of operation ran: %v", ops)
	}
}

// histOp runs one random operator action and records it in views.
func histOp(c *client, rng *rand.Rand, live string, views *[]*histView, seq *int, ops map[string]int) error {
	var snaps, clones []*histView
	for _, v := range *views {
		// A view whose removal the kill cut off may be gone or not: it
		// is neither used nor removed again (a second remove would find
		// it gone), and verifyHistory does not check it.
		if v.removed || v.removing || !v.acked {
			continue
		}
		if v.kind == "snapshot" {
			snaps = append(snaps, v)
		} else {
			clones = append(clones, v)
		}
	}
	*seq++
	switch r := rng.IntN(10); {
	case r < 4: // a snapshot
		name := fmt.Sprintf("s%d", *seq)
		v := &histView{name: live + "--snap-" + name, kind: "snapshot", snapshot: name, start: time.Now()}
		*views = append(*views, v)
		if err := c.json("PUT", "/v1/buckets/"+live+"/snapshots/"+name, nil, nil, nil); err != nil {
			return fmt.Errorf("snapshot %s: %w", name, err)
		}
		v.end, v.acked = time.Now(), true
		ops["snapshot"]++
		if len(snaps)+1 > histMaxViews {
			old := snaps[0]
			old.removing = true
			if err := c.json("DELETE", "/v1/buckets/"+live+"/snapshots/"+old.snapshot, nil, nil, nil); err != nil {
				return fmt.Errorf("remove snapshot %s: %w", old.snapshot, err)
			}
			old.removed, old.removing = true, false
			ops["snapshot-rm"]++
		}
	case r < 6 && len(clones) < histMaxViews: // a clone, of now or of a snapshot
		name := fmt.Sprintf("hist-c%d", *seq)
		q := url.Values{"to": {name}}
		v := &histView{name: name, kind: "clone", start: time.Now()}
		if len(snaps) > 0 && rng.IntN(2) == 0 {
			from := snaps[rng.IntN(len(snaps))]
			q.Set("snapshot", from.snapshot)
			v.kind, v.start, v.end = "clone-of-snapshot", from.start, from.end
		}
		*views = append(*views, v)
		if err := c.json("POST", "/v1/buckets/"+live+"/clone", q, nil, nil); err != nil {
			return fmt.Errorf("clone %s: %w", name, err)
		}
		if v.kind == "clone" {
			v.end = time.Now()
		}
		v.acked = true
		ops["clone"]++
	case r < 8 && len(clones) > 0: // snapshot tree reduction of a clone
		cl := clones[rng.IntN(len(clones))]
		if err := c.json("POST", "/v1/buckets/"+cl.name+"/reduce", nil, nil, nil); err != nil {
			return fmt.Errorf("reduce %s: %w", cl.name, err)
		}
		ops["reduce"]++
	default: // garbage collection: a full scan
		if err := c.json("POST", "/v1/curator/run", url.Values{"kind": {"full"}, "wait": {"1"}}, nil, nil); err != nil {
			return fmt.Errorf("full scan: %w", err)
		}
		ops["gc"]++
	}
	return nil
}

// verifyHistory checks the live bucket and every view (see the top).
func verifyHistory(t *testing.T, c *client, seed uint64, live string, book *histBook, views []*histView) {
	t.Helper()
	far := time.Now().Add(time.Hour)
	// The live bucket: as of now, every acknowledged write is there.
	checkView(t, c, seed, book, live, far, far, true)
	for _, v := range views {
		keys, err := listAll(c, v.name)
		var ae *apiErr
		if errors.As(err, &ae) && ae.Status == 404 {
			if v.acked && !v.removed && !v.removing {
				t.Errorf("%s %s was acknowledged and is gone", v.kind, v.name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: list: %v", v.kind, v.name, err)
			continue
		}
		if v.removed {
			t.Errorf("%s %s was removed (acknowledged) and still lists %d keys", v.kind, v.name, len(keys))
			continue
		}
		checkView(t, c, seed, book, v.name, v.start, v.end, false)
	}
}

// checkView checks one bucket as a point in time within [start, end];
// exactLive demands the latest acknowledged generation (or a later one in
// flight) — the live bucket.
func checkView(t *testing.T, c *client, seed uint64, book *histBook, bucket string, start, end time.Time, exactLive bool) {
	t.Helper()
	listed, err := listAll(c, bucket)
	if err != nil {
		t.Errorf("%s: list: %v", bucket, err)
		return
	}
	present := map[string]bool{}
	for _, k := range listed {
		present[k] = true
	}
	for _, key := range book.keys() {
		lo, hi := book.window(key, start, end)
		var got []byte
		if present[key] {
			got, err = c.get(bucket, key)
			if err != nil {
				t.Errorf("%s/%s: listed but unreadable: %v", bucket, key, err)
				continue
			}
		}
		ok := false
		for g := max(lo, -1); g <= hi && !ok; g++ {
			switch {
			case g == -1 || book.gens[key][g].deleted:
				ok = !present[key]
			default:
				ok = present[key] && bytes.Equal(got, content(seed, key, g, histMinSize, histMaxSize))
			}
		}
		if !ok {
			state := "absent"
			if present[key] {
				state = fmt.Sprintf("%d bytes matching no generation in the window", len(got))
				// Say which generation it is, if any: an older or newer
				// one is a snapshot-consistency error, none is bad data.
				for g := range book.gens[key] {
					if !book.gens[key][g].deleted && bytes.Equal(got, content(seed, key, g, histMinSize, histMaxSize)) {
						state += fmt.Sprintf(" (they are generation %d)", g)
						break
					}
				}
			}
			t.Errorf("%s/%s: %s; may show generations %d..%d (live=%v)\n%s", bucket, key, state, lo, hi, exactLive, book.describe(key, start, end))
		}
		delete(present, key)
	}
	for k := range present {
		if !strings.HasPrefix(k, "w") {
			continue
		}
		t.Errorf("%s/%s: listed, never written", bucket, k)
	}
}

func listAll(c *client, bucket string) ([]string, error) {
	var keys []string
	after := ""
	for {
		var page struct {
			Objects []struct {
				Key string `json:"key"`
			} `json:"objects"`
			Truncated bool   `json:"truncated"`
			Next      string `json:"next"`
		}
		if err := c.json("GET", "/v1/data/"+bucket, url.Values{"after": {after}}, nil, &page); err != nil {
			return nil, err
		}
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if !page.Truncated {
			return keys, nil
		}
		after = page.Next
	}
}

// diagnoseStuck describes a server whose request timed out: the Curator's
// status, and where its goroutines wait (written to a file: it is long).
func diagnoseStuck(t *testing.T, c *client) string {
	var out strings.Builder
	if resp, err := c.do("GET", "/v1/curator/status", nil, nil); err == nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 8000))
		resp.Body.Close()
		fmt.Fprintf(&out, "curator status: %s", b)
	}
	if resp, err := c.do("GET", "/debug/pprof/goroutine", url.Values{"debug": {"2"}}, nil); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		f, err := os.CreateTemp("", "terrace-e2e-goroutines-*.txt")
		if err == nil {
			f.Write(b)
			f.Close()
			fmt.Fprintf(&out, "; goroutines in %s", f.Name())
		}
	}
	return out.String()
}
