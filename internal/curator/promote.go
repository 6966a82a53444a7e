package curator

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
)

// Event-driven promotion. A scan finds hot data on a slow tier at the next
// partial scan (an hour by default, or whenever the tiering scheduler
// decides); a client reading a cold object many times should not wait that
// long. The object layer's access tracker writes a promotion request
// (meta.HotKey) in the same transaction that takes an egroup's window read
// count to the promotion threshold; the master watches those requests and
// runs decide.Promotions on just those egroups, as a small job of its own.
// The request is deleted whatever the outcome: the next scan's tiering
// sees the same access record, so nothing depends on a request surviving.

const (
	// promoteDebounce gathers the requests of a burst of reads into one job.
	promoteDebounce = 200 * time.Millisecond
	// promoteBatch bounds the requests one promotion job takes.
	promoteBatch = 256
	// promoteGap separates promotion jobs by more than the device
	// statistics' refresh (1 s), so each job's decision sees the tier
	// usage the previous one left: back to back on a stale snapshot, they
	// filled the fast tier past its threshold and demotion then moved the
	// data straight back down.
	promoteGap = 2 * time.Second
)

// watchHot signals c.hot whenever a promotion request appears, and once at
// start (requests made while no master was watching). It returns when ctx
// ends; a closed watch (compaction, a restarted store) is re-opened.
func (c *Curator) watchHot(ctx context.Context) {
	c.signalHot()
	for ctx.Err() == nil {
		for ev := range c.kv.Watch(ctx, []byte(meta.PrefixHot)) {
			if ev.Type == meta.EventPut {
				c.signalHot()
			}
		}
		c.signalHot() // events may have been missed while the watch was down
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (c *Curator) signalHot() {
	select {
	case c.hot <- struct{}{}:
	default:
	}
}

// PromoteHot runs the pending promotion requests now: it loads each
// requested egroup's record and access counts, decides promotions with the
// tiering thresholds (decide.Promotions) and moves them as one job. It
// returns nil, nil when there was nothing to do. A scan in progress makes
// it wait: one job at a time keeps every task's compare-and-swap
// meaningful.
func (c *Curator) PromoteHot(ctx context.Context) (*JobRecord, error) {
	items, err := c.kv.Scan(ctx, []byte(meta.PrefixHot), meta.PrefixEnd([]byte(meta.PrefixHot)), promoteBatch)
	if err != nil || len(items) == 0 {
		return nil, err
	}
	c.runMu.Lock()
	defer c.runMu.Unlock()
	ctx, cancel := c.whileLeader(ctx)
	defer cancel()
	rec := &JobRecord{ID: fmt.Sprintf("%d", c.jobID()), Kind: "promote", Trigger: fmt.Sprintf("%d hot egroup(s)", len(items)),
		Start: c.now(), Planned: map[string]int{}, Done: map[string]int{}}
	c.mu.Lock()
	rec.Seed = c.rng.Uint64()
	c.running = rec
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = nil
		c.mu.Unlock()
	}()
	rng := rand.New(rand.NewPCG(rec.Seed, 0))

	egs := make([]decide.Egroup, 0, len(items))
	for _, it := range items {
		id, err := meta.ParseHotKey(it.Key)
		if err != nil {
			rec.addErr(err)
			continue
		}
		eg, rev, err := c.layer.Egroup(ctx, id)
		if errors.Is(err, object.ErrStale) {
			continue // removed since the reads
		}
		if err != nil {
			return rec, fmt.Errorf("curator: promotion: %w", err)
		}
		var a meta.Access
		var access *meta.Access
		switch _, err := meta.GetRecord(ctx, c.kv, meta.AccessKey(id), &a); {
		case err == nil:
			access = &a
		case !errors.Is(err, meta.ErrNotFound):
			return rec, fmt.Errorf("curator: promotion: %w", err)
		}
		d := egroupView(id, rev, eg, access)
		d.LiveBytes, d.LiveExtents = eg.Size, 1
		egs = append(egs, d)
	}
	rec.Records = len(egs)
	snap := c.snapshotFor()
	var tasks []decide.Task
	var refused []uint64
	if to, run := c.tierOptions(snap, egs); run {
		c.mu.Lock()
		tasks, refused = decide.Promotions(snap, egs, c.policy, to, rng)
		c.noteRefused(refused)
		c.mu.Unlock()
	}
	for _, t := range tasks {
		rec.Planned[string(t.Kind)]++
		if len(rec.Sample) < maxRecordList {
			rec.Sample = append(rec.Sample, t.String())
		}
	}
	if len(tasks) > 0 {
		ats := make([]actuate.Task, 0, len(tasks))
		for _, t := range tasks {
			ats = append(ats, actuate.FromDecide(t))
		}
		job := actuate.NewJob(rec.ID, rec.Kind, rec.Trigger, rec.Seed, rec.Start, ats)
		job.Deadline = rec.Start.Add(c.opts.JobTimeLimit)
		c.runJob(ctx, job, rec)
	}
	// Drop the requests this job saw; one made again since (a new
	// window crossing) has a newer revision and stays.
	var del meta.Txn
	for _, it := range items {
		del.Cmps, del.Ops = nil, nil
		del.If(it.Key, it.ModRev)
		del.Del(it.Key)
		if _, err := c.kv.Commit(context.WithoutCancel(ctx), &del); err != nil && !errors.Is(err, meta.ErrConflict) {
			rec.addErr(err)
		}
	}
	rec.End = c.now()
	c.m.jobSeconds.WithLabelValues(rec.Kind).Observe(rec.End.Sub(rec.Start).Seconds())
	c.m.jobs.WithLabelValues(rec.Kind).Inc()
	if len(tasks) > 0 {
		c.saveRecord(ctx, rec)
	}
	c.log.Info("curator promotion done", "requests", len(items), "egroups", len(egs), "planned", rec.Planned, "refused_for_room", len(refused), "done", rec.Done,
		"stale", rec.Stale, "failed", rec.Failed, "moved", rec.Moved, "took", rec.End.Sub(rec.Start).Round(time.Millisecond))
	return rec, ctx.Err()
}
