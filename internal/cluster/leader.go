package cluster

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Elector campaigns for a named role (e.g. the Curator master) through an
// etcd election bound to a session lease: if the leader dies, its lease
// expires and another node wins.
type Elector struct {
	c      *clientv3.Client
	name   string
	self   string
	log    *slog.Logger
	leader atomic.Bool
	term   atomic.Uint64
}

// NewElector returns an elector for role name.
func NewElector(c *clientv3.Client, name, self string, log *slog.Logger) *Elector {
	return &Elector{c: c, name: name, self: self, log: log}
}

// IsLeader reports whether this node holds the role now.
func (e *Elector) IsLeader() bool { return e.leader.Load() }

// Term counts the elections this node has won: it changes whenever the
// node holds the role again, so a caller that polls IsLeader can tell a
// term it missed (lost and won back between two polls).
func (e *Elector) Term() uint64 { return e.term.Load() }

// Run campaigns until ctx ends, re-campaigning after a lost session.
func (e *Elector) Run(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := concurrency.NewSession(e.c, concurrency.WithTTL(int(DefaultHeartbeatTTL/time.Second)), concurrency.WithContext(ctx))
		if err != nil {
			time.Sleep(time.Second)
			continue
		}
		el := concurrency.NewElection(s, "j/election/"+e.name)
		if err := el.Campaign(ctx, e.self); err != nil {
			s.Close()
			continue
		}
		e.term.Add(1)
		e.leader.Store(true)
		e.log.Info("won election", "role", e.name, "term", e.term.Load())
		select {
		case <-ctx.Done():
		case <-s.Done():
			e.log.Warn("lost election session", "role", e.name)
		}
		e.leader.Store(false)
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		el.Resign(rctx)
		cancel()
		s.Close()
	}
}
