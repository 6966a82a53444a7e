package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/terrace-storage/terrace/internal/object"
)

// recoveryRetryLimit is how long start-up recovery keeps retrying: in a
// cluster, metadata can be briefly unavailable while a node starts (an
// etcd leader election, this node's own member catching up after a crash)
// and a node that gives up stays down until someone restarts it (found by
// the chaos suite: "recovery: etcd commit: request timed out" during a
// partition). A single node's Pebble has no such transient errors.
func recoveryRetryLimit(cfg Config) time.Duration {
	if cfg.Clustered() {
		return 2 * time.Minute
	}
	return 0
}

// recoverRetry runs recovery until it succeeds, ctx ends or limit has
// passed, waiting 1 s, 2 s, 4 s ... (at most 10 s) between attempts.
// Recovery is idempotent: every step compares metadata with the files
// again.
func recoverRetry(ctx context.Context, run func(context.Context) (object.RecoveryReport, error), limit time.Duration, log *slog.Logger) (object.RecoveryReport, error) {
	deadline := time.Now().Add(limit)
	wait := time.Second
	for attempt := 1; ; attempt++ {
		rep, err := run(ctx)
		if err == nil {
			return rep, nil
		}
		if time.Now().Add(wait).After(deadline) || ctx.Err() != nil {
			if attempt > 1 {
				return rep, fmt.Errorf("%w (after %d attempts)", err, attempt)
			}
			return rep, err
		}
		log.Warn("recovery failed; retrying", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return rep, ctx.Err()
		}
		wait = min(2*wait, 10*time.Second)
	}
}
