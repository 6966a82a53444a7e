package client

import (
	"time"

	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/store"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// LayoutToProto converts a layout for the wire.
func LayoutToProto(l layout.Layout) *zlogpb.Layout {
	out := &zlogpb.Layout{Epoch: l.Epoch}
	for _, s := range l.Segments {
		ps := &zlogpb.Segment{Id: s.ID, Start: s.Start, End: s.End, Epoch: s.Epoch}
		for _, st := range s.Stripes {
			pst := &zlogpb.Stripe{}
			for _, r := range st {
				pst.Replicas = append(pst.Replicas, &zlogpb.Replica{Node: r.Node, Device: r.Device, Stale: r.Stale})
			}
			ps.Stripes = append(ps.Stripes, pst)
		}
		out.Segments = append(out.Segments, ps)
	}
	return out
}

// LayoutFromProto converts a wire layout (NextSegment is not carried).
func LayoutFromProto(p *zlogpb.Layout) layout.Layout {
	var l layout.Layout
	if p == nil {
		return l
	}
	l.Epoch = p.Epoch
	for _, ps := range p.Segments {
		s := layout.Segment{ID: ps.Id, Start: ps.Start, End: ps.End, Epoch: ps.Epoch}
		for _, pst := range ps.Stripes {
			var st []layout.Replica
			for _, r := range pst.Replicas {
				st = append(st, layout.Replica{Node: r.Node, Device: r.Device, Stale: r.Stale})
			}
			s.Stripes = append(s.Stripes, st)
		}
		l.Segments = append(l.Segments, s)
		l.NextSegment = max(l.NextSegment, s.ID+1)
	}
	return l
}

// RecordToProto converts a record for the wire.
func RecordToProto(r layout.Record) *zlogpb.LogRecord {
	return &zlogpb.LogRecord{Name: r.Name, Id: r.ID, Vector: r.Vector, Stripes: uint32(r.Stripes),
		MaxLeasePositions: uint32(r.MaxLeasePositions), MaxLeaseHoldMs: r.MaxLeaseHold.Milliseconds(),
		CreatedUnixNs: r.Created, TrimBefore: r.TrimBefore}
}

// RecordFromProto converts a wire record.
func RecordFromProto(p *zlogpb.LogRecord) layout.Record {
	if p == nil {
		return layout.Record{}
	}
	return layout.Record{Name: p.Name, ID: p.Id, Vector: p.Vector, Stripes: int(p.Stripes),
		MaxLeasePositions: int(p.MaxLeasePositions), MaxLeaseHold: time.Duration(p.MaxLeaseHoldMs) * time.Millisecond,
		Created: p.CreatedUnixNs, TrimBefore: p.TrimBefore}
}

// KindToProto and friends map the store's kinds and statuses to the wire.
func KindToProto(k store.Kind) zlogpb.Kind { return zlogpb.Kind(k) }

// KindFromProto maps a wire kind to the store's.
func KindFromProto(k zlogpb.Kind) store.Kind { return store.Kind(k) }

// StatusToProto maps a store status to the wire.
func StatusToProto(s store.Status) zlogpb.Status {
	switch s {
	case store.OK:
		return zlogpb.Status_STATUS_OK
	case store.Taken:
		return zlogpb.Status_STATUS_TAKEN
	case store.StaleEpoch:
		return zlogpb.Status_STATUS_STALE_EPOCH
	case store.Sealed:
		return zlogpb.Status_STATUS_SEALED
	case store.Busy:
		return zlogpb.Status_STATUS_BUSY
	case store.NotWritten:
		return zlogpb.Status_STATUS_NOT_WRITTEN
	case store.Trimmed:
		return zlogpb.Status_STATUS_TRIMMED
	}
	return zlogpb.Status_STATUS_ERROR
}
