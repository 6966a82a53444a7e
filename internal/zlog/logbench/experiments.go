package logbench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/zlog/client"
)

// positions measures positions obtained per second by c clients, each its
// own client with its own connections, taking positions one by one (with
// or without a lease) for the run's duration.
func (r *runner) positions(ctx context.Context, exp, variant string, clients, lease int, hold time.Duration) error {
	name, err := r.newLog(ctx, max(lease, 0), hold)
	if err != nil {
		return err
	}
	defer r.deleteLog(ctx, name)
	logs := make([]*client.Log, clients)
	cls := make([]*client.Client, clients)
	for i := range logs {
		c, err := r.newClient(i)
		if err != nil {
			return err
		}
		cls[i] = c
		opts := client.LogOptions{}
		if lease > 1 {
			opts = client.LogOptions{LeasePositions: lease, LeaseHold: hold}
		}
		logs[i] = c.Open(name, opts)
		if _, err := logs[i].Next(ctx); err != nil { // warm up connections
			return err
		}
	}
	hists := make([]bench.Histogram, clients)
	var ops, errs atomic.Int64
	cpu0 := r.serverCPU()
	start := time.Now()
	deadline := start.Add(r.o.Duration)
	var wg sync.WaitGroup
	for i, l := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &hists[i]
			for time.Now().Before(deadline) {
				t0 := time.Now()
				if _, err := l.Next(ctx); err != nil {
					errs.Add(1)
					continue
				}
				h.Record(time.Since(t0))
				ops.Add(1)
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu := r.serverCPU() - cpu0
	var all bench.Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	r.add(Row{Experiment: exp, Variant: variant, Clients: clients, Lease: lease, Ops: ops.Load(), Seconds: secs,
		PerSec: float64(ops.Load()) / secs, Latency: all.Summary(), ServerCPU: cpu, Errors: errs.Load()})
	for _, c := range cls {
		c.Close()
	}
	return nil
}

// next: sequencer round trips per second, one Next per position.
func (r *runner) next(ctx context.Context) error {
	fmt.Fprintln(r.out, "next: one sequencer round trip per position")
	for _, c := range []int{1, 2, 8} {
		if err := r.positions(ctx, "next", fmt.Sprintf("clients=%d", c), c, 0, 0); err != nil {
			return err
		}
	}
	return nil
}

// lease: positions per second with leased batching, 2 clients.
func (r *runner) lease(ctx context.Context) error {
	fmt.Fprintln(r.out, "lease: positions per second by lease size (2 clients, hold 100ms)")
	for _, n := range r.o.LeaseSizes {
		if err := r.positions(ctx, "lease", fmt.Sprintf("lease=%d", n), 2, n, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// appends: C clients append fixed-size entries, leases off then on; a
// subscriber follows the log to measure how far behind the appenders an
// in-order reader is.
func (r *runner) appends(ctx context.Context) error {
	fmt.Fprintf(r.out, "append: %d clients, %d-byte entries\n", r.o.Clients, r.o.EntryBytes)
	for _, d := range r.o.Depths {
		if err := r.appendRun(ctx, fmt.Sprintf("depth=%d lease off", d), d, 0, 0); err != nil {
			return err
		}
		if err := r.appendRun(ctx, fmt.Sprintf("depth=%d lease=%d/%s", d, r.o.AppendLease, r.o.AppendLeaseHold), d, r.o.AppendLease, r.o.AppendLeaseHold); err != nil {
			return err
		}
	}
	return nil
}

func (r *runner) appendRun(ctx context.Context, variant string, depth, lease int, hold time.Duration) error {
	name, err := r.newLog(ctx, lease, hold)
	if err != nil {
		return err
	}
	defer r.deleteLog(ctx, name)
	cls := make([]*client.Client, r.o.Clients)
	logs := make([]*client.Log, r.o.Clients)
	for i := range logs {
		c, err := r.newClient(i)
		if err != nil {
			return err
		}
		cls[i] = c
		opts := client.LogOptions{}
		if lease > 1 {
			opts = client.LogOptions{LeasePositions: lease, LeaseHold: hold}
		}
		logs[i] = c.Open(name, opts)
	}
	defer func() {
		for _, c := range cls {
			c.Close()
		}
	}()
	payload := make([]byte, r.o.EntryBytes)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	// The subscriber records when it delivered each position.
	var subMu sync.Mutex
	delivered := map[uint64]time.Time{}
	sc, err := r.newClient(1)
	if err != nil {
		return err
	}
	defer sc.Close()
	subCtx, subCancel := context.WithCancel(ctx)
	defer subCancel()
	if !r.o.NoSubscriber {
		go sc.Open(name, client.LogOptions{}).Subscribe(subCtx, 0, func(e client.Entry) error {
			now := time.Now()
			subMu.Lock()
			delivered[e.Pos] = now
			subMu.Unlock()
			return nil
		})
	}
	var ackMu sync.Mutex
	acked := map[uint64]time.Time{}
	var firstErr atomic.Value
	hists := make([]bench.Histogram, len(logs)*depth)
	var ops, errs atomic.Int64
	cpu0 := r.serverCPU()
	start := time.Now()
	deadline := start.Add(r.o.Duration)
	var wg sync.WaitGroup
	for i := range hists {
		l := logs[i%len(logs)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &hists[i]
			for time.Now().Before(deadline) {
				t0 := time.Now()
				pos, err := l.Append(ctx, payload)
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				now := time.Now()
				h.Record(now.Sub(t0))
				ops.Add(1)
				ackMu.Lock()
				acked[pos] = now
				ackMu.Unlock()
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu := r.serverCPU() - cpu0
	// Let the subscriber catch up (bounded), then measure its lag.
	catch := time.Now().Add(30 * time.Second)
	for !r.o.NoSubscriber && time.Now().Before(catch) {
		subMu.Lock()
		n := len(delivered)
		subMu.Unlock()
		if n >= len(acked) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lag bench.Histogram
	subMu.Lock()
	for p, at := range acked {
		if d, ok := delivered[p]; ok {
			lag.Record(d.Sub(at))
		}
	}
	subMu.Unlock()
	var all bench.Histogram
	for i := range hists {
		all.Merge(&hists[i])
	}
	ls := lag.Summary()
	lagp := &ls
	if r.o.NoSubscriber {
		lagp = nil
	}
	n := ops.Load()
	r.add(Row{Experiment: "append", Variant: variant, Clients: r.o.Clients, Depth: depth, Lease: lease, Ops: n, Seconds: secs,
		PerSec: float64(n) / secs, MBps: float64(n) * float64(r.o.EntryBytes) / secs / 1e6, Latency: all.Summary(),
		Lag: lagp, ServerCPU: cpu, Errors: errs.Load(), Note: fmt.Sprintf("subscriber delivered %d of %d%s", lag.Count(), n, errNote(&firstErr))})
	return nil
}

// failover: 8 appenders, the sequencer host killed every few seconds.
func (r *runner) failover(ctx context.Context) error {
	if r.o.FailoverRounds == 0 || len(r.cl.Nodes) < 3 {
		fmt.Fprintln(r.out, "failover: skipped (needs 3 nodes and --failover-rounds > 0)")
		return nil
	}
	fmt.Fprintf(r.out, "failover: 8 appenders, the sequencer host killed %d times\n", r.o.FailoverRounds)
	name, err := r.newLog(ctx, 0, 0)
	if err != nil {
		return err
	}
	const slot = 100 * time.Millisecond
	start := time.Now()
	var slotsMu sync.Mutex
	slots := map[int]int{}
	var killAt, resumeAt atomic.Int64 // ns since start; killAt -1 when not waiting
	killAt.Store(-1)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	payload := make([]byte, 1024)
	var errs atomic.Int64
	for i := 0; i < 8; i++ {
		c, err := r.newClient(i)
		if err != nil {
			return err
		}
		l := c.Open(name, client.LogOptions{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				call := time.Since(start)
				actx, cancel := context.WithTimeout(ctx, 30*time.Second)
				_, err := l.Append(actx, payload)
				cancel()
				ret := time.Since(start)
				if err != nil {
					errs.Add(1)
					continue
				}
				slotsMu.Lock()
				slots[int(ret/slot)]++
				slotsMu.Unlock()
				if k := killAt.Load(); k >= 0 && int64(call) > k {
					resumeAt.CompareAndSwap(0, int64(ret))
				}
			}
		}()
	}
	admin, err := r.newClient(0)
	if err != nil {
		return err
	}
	defer admin.Close()
	time.Sleep(3 * time.Second)
	for round := 0; round < r.o.FailoverRounds; round++ {
		info, err := admin.Info(ctx, name)
		if err != nil {
			return err
		}
		var victim = -1
		for i, n := range r.cl.Nodes {
			if n.ID == info.Host {
				victim = i
			}
		}
		if victim < 0 {
			return fmt.Errorf("host %q is not a node of the cluster", info.Host)
		}
		resumeAt.Store(0)
		k := time.Since(start)
		killAt.Store(int64(k))
		r.cl.Kill(r.cl.Nodes[victim])
		r.res.Kills = append(r.res.Kills, k.Seconds())
		deadline := time.Now().Add(60 * time.Second)
		for resumeAt.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if resumeAt.Load() == 0 {
			return fmt.Errorf("round %d: appends did not resume within 60s", round+1)
		}
		resume := time.Duration(resumeAt.Load() - killAt.Load())
		killAt.Store(-1)
		r.res.Resumes = append(r.res.Resumes, resume)
		r.add(Row{Experiment: "failover", Variant: fmt.Sprintf("round=%d", round+1), Clients: 8, Ops: 1, Seconds: resume.Seconds(),
			Latency: bench.LatencySummary{P50Ms: float64(resume) / 1e6, P99Ms: float64(resume) / 1e6, MaxMs: float64(resume) / 1e6},
			Note:    fmt.Sprintf("killed %s (host), resumed after %s", r.cl.Nodes[victim].ID, resume.Round(time.Millisecond))})
		time.Sleep(2 * time.Second)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err = r.cl.Restart(rctx, r.cl.Nodes[victim])
		cancel()
		if err != nil {
			return err
		}
		time.Sleep(4 * time.Second)
	}
	close(stop)
	wg.Wait()
	slotsMu.Lock()
	last := 0
	for s := range slots {
		last = max(last, s)
	}
	for s := 0; s <= last; s++ {
		r.res.Timeline = append(r.res.Timeline, Sample{T: float64(s) * slot.Seconds(), Appends: slots[s]})
	}
	slotsMu.Unlock()
	r.deleteLog(ctx, name)
	return nil
}

// errNote is "; first error: ..." when an error was recorded.
func errNote(v *atomic.Value) string {
	if e, ok := v.Load().(string); ok {
		return "; first error: " + e
	}
	return ""
}
