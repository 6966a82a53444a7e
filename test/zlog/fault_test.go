package zlog

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/checker"
	"github.com/terrace-storage/terrace/internal/zlog/client"
)

var (
	rounds      = flag.Int("rounds", 3, "sequencer-host kills in TestSequencerKill")
	resumeBound = flag.Duration("resume-bound", 5*time.Second, "longest allowed gap between a kill and the first append that began after it succeeding")
)

// TestSequencerKill is the shared log's fault test: 8 appenders (each its
// own client, starting at every node in turn), a random reader and a
// subscriber run while the node hosting the sequencer is killed with
// SIGKILL, repeatedly, and restarted. Then the whole log is read (holes
// filled) and the recorded history is checked: every acknowledged append
// is in the log exactly once at its position, no position has two
// entries, per-position histories are linearizable (porcupine), there are
// no holes below the tail, the subscriber saw every entry in position
// order, and appends resumed within the bound after each kill. Finally
// the restarted nodes' stale replicas are repaired.
func TestSequencerKill(t *testing.T) {
	c := startCluster(t, 3, 31000)
	admin := c.newClient(t, 0, "test-admin")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := admin.Create(ctx, "faults", client.CreateOptions{Vector: "any=2", Stripes: 6}); err != nil {
		t.Fatal(err)
	}
	// Durability needs each stripe's two replicas on two nodes.
	for deadline := time.Now().Add(30 * time.Second); ; {
		info, err := admin.Info(ctx, "faults")
		if err == nil && len(info.Layout.Segments) > 0 {
			for _, st := range info.Layout.Segments[0].Stripes {
				if len(st.Replicas) != 2 || st.Replicas[0].Node == st.Replicas[1].Node {
					t.Fatalf("stripe replicas %v: want two nodes", st.Replicas)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no layout after 30s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	h := checker.NewHistory()
	var acked atomic.Int64
	var killAt, resumeAt atomic.Int64 // history clock; resumeAt 0 until the first ack begun after killAt
	killAt.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []string
	pad := strings.Repeat("x", 200)
	for w := 0; w < 8; w++ {
		l := c.newClient(t, w%3, fmt.Sprintf("appender-%d", w)).Open("faults", client.LogOptions{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%06d-%s", w, i, pad)
				call := h.Now()
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				pos, err := l.Append(actx, []byte(v))
				cancel()
				ret := h.Now()
				h.Add(checker.Op{Client: w, Kind: checker.Append, Value: v, Pos: pos, OK: err == nil, Call: call, Return: ret})
				if err != nil {
					errMu.Lock()
					errs = append(errs, err.Error())
					errMu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				acked.Add(1)
				if k := killAt.Load(); k >= 0 && call > k {
					resumeAt.CompareAndSwap(0, ret)
				}
			}
		}()
	}
	// A reader of recent positions and of the tail, recorded.
	reader := c.newClient(t, 1, "reader").Open("faults", client.LogOptions{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-stop:
				return
			default:
			}
			call := h.Now()
			rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			tail, err := reader.Tail(rctx)
			cancel()
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			h.Add(checker.Op{Client: 100, Kind: checker.Tail, Pos: tail, OK: true, Call: call, Return: h.Now()})
			for k := 0; k < 8 && tail > 0; k++ {
				p := tail - 1 - uint64(rng.IntN(int(min(tail, 300))))
				call := h.Now()
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				e, err := reader.Read(rctx, p)
				cancel()
				op := checker.Op{Client: 100, Kind: checker.Read, Pos: p, Call: call, Return: h.Now()}
				switch {
				case err == nil && e.Kind == client.KindData:
					op.Value, op.OK = string(e.Data), true
				case err == nil && e.Kind == client.KindFill:
					op.Value, op.OK = checker.Filled, true
				case errors.Is(err, client.ErrNotWritten):
					op.Value, op.OK = checker.NotWritten, true
				}
				h.Add(op)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	// A subscriber from position 0.
	type seen struct {
		pos  uint64
		kind client.Kind
		data string
	}
	var subMu sync.Mutex
	var sub []seen
	subCtx, subCancel := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() {
		l := c.newClient(t, 2, "subscriber").Open("faults", client.LogOptions{HoleTimeout: 3 * time.Second})
		subDone <- l.Subscribe(subCtx, 0, func(e client.Entry) error {
			subMu.Lock()
			defer subMu.Unlock()
			if want := uint64(len(sub)); e.Pos != want {
				return fmt.Errorf("subscriber got position %d, want %d", e.Pos, want)
			}
			sub = append(sub, seen{e.Pos, e.Kind, string(e.Data)})
			return nil
		})
	}()

	waitAcks := func(n int64, d time.Duration) {
		deadline := time.Now().Add(d)
		for acked.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d appends acknowledged after %s, want %d; errors: %v", acked.Load(), d, n, firstN(errs, 5))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitAcks(300, 60*time.Second)
	var resumes []time.Duration
	for r := 0; r < *rounds; r++ {
		info, err := admin.Info(ctx, "faults")
		if err != nil {
			t.Fatal(err)
		}
		victim := c.node(info.Host)
		before := acked.Load()
		resumeAt.Store(0)
		killAt.Store(h.Now())
		c.Kill(victim)
		t.Logf("round %d: killed sequencer host %s (epoch %d, %d appends acknowledged)", r+1, victim.ID, info.Layout.Epoch, before)
		deadline := time.Now().Add(60 * time.Second)
		for resumeAt.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no append begun after the kill succeeded within 60s; errors: %v", r+1, firstN(errs, 5))
			}
			time.Sleep(10 * time.Millisecond)
		}
		resume := time.Duration(resumeAt.Load() - killAt.Load())
		resumes = append(resumes, resume)
		t.Logf("round %d: appends resumed %s after the kill", r+1, resume.Round(time.Millisecond))
		killAt.Store(-1)
		waitAcks(acked.Load()+200, 60*time.Second)
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Minute)
		if err := c.Restart(rctx, victim); err != nil {
			rcancel()
			t.Fatalf("restart %s: %v", victim.ID, err)
		}
		rcancel()
		waitAcks(acked.Load()+300, 60*time.Second)
	}
	close(stop)
	wg.Wait()

	// Read the whole log, filling what no appender will ever write.
	final := map[uint64]string{}
	fl := admin.Open("faults", client.LogOptions{})
	tail, err := fl.Tail(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for p := uint64(0); p < tail; p++ {
		call := h.Now()
		e, err := fl.Read(ctx, p)
		kind := checker.Read
		if errors.Is(err, client.ErrNotWritten) {
			kind = checker.Fill
			e, err = fl.Fill(ctx, p)
		}
		if err != nil {
			t.Fatalf("final read of %d: %v", p, err)
		}
		v := string(e.Data)
		if e.Kind == client.KindFill {
			v = checker.Filled
		}
		final[p] = v
		h.Add(checker.Op{Client: 200, Kind: kind, Pos: p, Value: v, OK: true, Call: call, Return: h.Now()})
	}
	rep := checker.Check(h.Ops(), final, tail, 2*time.Minute)
	t.Logf("checker: %s", rep)
	if !rep.OK() {
		t.Fatalf("history check failed:\n%s", rep)
	}
	// The subscriber catches up with the tail and saw exactly the log.
	deadline := time.Now().Add(60 * time.Second)
	for {
		subMu.Lock()
		n := len(sub)
		subMu.Unlock()
		if uint64(n) >= tail {
			break
		}
		select {
		case err := <-subDone:
			t.Fatalf("subscriber stopped at %d of %d: %v", n, tail, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriber at %d of %d after 60s", n, tail)
		}
		time.Sleep(50 * time.Millisecond)
	}
	subCancel()
	subMu.Lock()
	for _, s := range sub[:tail] {
		want := final[s.pos]
		got := s.data
		if s.kind == client.KindFill {
			got = checker.Filled
		}
		if got != want {
			t.Fatalf("subscriber saw %q at %d, the log has %q", trunc(got), s.pos, trunc(want))
		}
	}
	subMu.Unlock()
	for i, r := range resumes {
		if r > *resumeBound {
			t.Errorf("round %d: appends resumed after %s, bound %s", i+1, r.Round(time.Millisecond), *resumeBound)
		}
	}
	t.Logf("resume after each kill: %v; %d append errors (retried): %v", resumes, len(errs), firstN(errs, 3))
	// Repair brings the restarted nodes' replicas back.
	deadline = time.Now().Add(90 * time.Second)
	for {
		info, err := admin.Info(ctx, "faults")
		if err != nil {
			t.Fatal(err)
		}
		stale := 0
		for _, seg := range info.Layout.Segments {
			for _, st := range seg.Stripes {
				for _, r := range st.Replicas {
					if r.Stale {
						stale++
					}
				}
			}
		}
		if stale == 0 {
			t.Logf("every replica fresh again (%d segments, epoch %d)", len(info.Layout.Segments), info.Layout.Epoch)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d stale replicas left after 90s", stale)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func trunc(s string) string {
	if len(s) > 30 {
		return s[:30] + "..."
	}
	return s
}
