package node

import (
	"context"
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/store"
)

// GC settings: replicas of segments no longer in any layout (trimmed,
// deleted logs) are dropped after being unknown for dropGrace, so a layout
// change still propagating is never mistaken for garbage.
const (
	gcEvery   = 10 * time.Second
	dropGrace = time.Minute
)

// gcLoop applies prefix trims to this node's replicas and drops replicas
// no layout mentions.
func (s *Service) gcLoop(ctx context.Context) {
	t := time.NewTicker(gcEvery)
	defer t.Stop()
	applied := map[uint64]uint64{} // log ID -> trim point applied
	unknown := map[store.Key]time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !s.cache.isLoaded() {
			continue
		}
		for _, name := range s.cache.names() {
			v, ok := s.cache.get(name)
			if !ok || v.Record.TrimBefore <= applied[v.Record.ID] {
				continue
			}
			n := s.store.TrimBefore(v.Record.ID, v.Record.TrimBefore)
			applied[v.Record.ID] = v.Record.TrimBefore
			s.log.Info("log trim applied to local replicas", "log", name, "before", v.Record.TrimBefore, "entries", n)
		}
		now := time.Now()
		seen := map[store.Key]bool{}
		dropped := s.store.Drop(func(dev string, k store.Key) bool {
			if s.known(k) {
				delete(unknown, k)
				return true
			}
			seen[k] = true
			since, ok := unknown[k]
			if !ok {
				unknown[k] = now
				return true
			}
			return now.Sub(since) < dropGrace
		})
		for k := range unknown {
			if !seen[k] {
				delete(unknown, k)
			}
		}
		if dropped > 0 {
			s.log.Info("dropped log replicas no layout mentions", "replicas", dropped)
		}
	}
}

// known reports whether a replica's segment is in its log's layout (or
// newer than every segment the layout has had).
func (s *Service) known(k store.Key) bool {
	name, ok := s.cache.byID(k.Log)
	if !ok {
		return false
	}
	v, ok := s.cache.get(name)
	if !ok {
		return false
	}
	if k.Segment >= v.Layout.NextSegment {
		return true
	}
	for _, seg := range v.Layout.Segments {
		if seg.ID == k.Segment {
			return true
		}
	}
	return false
}
