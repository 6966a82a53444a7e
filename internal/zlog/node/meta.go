package node

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Defaults of a new log.
const (
	// DefaultStripes: 8 stripes spread a 3-node cluster's primaries over
	// every node several times, and keep a recovery's seal to 16 RPCs.
	DefaultStripes = 8
	DefaultVector  = "any=2"
)

// CreateLog creates a log: its record and an empty layout (epoch 0, no
// segments). The sequencer host's first recovery opens segment 0.
func (s *Service) CreateLog(ctx context.Context, req *zlogpb.CreateLogRequest) (*zlogpb.LogInfo, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	rec := layout.Record{Name: req.Name, Vector: req.Vector, Stripes: int(req.Stripes),
		MaxLeasePositions: int(req.MaxLeasePositions), MaxLeaseHold: time.Duration(req.MaxLeaseHoldMs) * time.Millisecond,
		Created: time.Now().UnixNano()}
	if rec.Vector == "" {
		rec.Vector = DefaultVector
	}
	if rec.Stripes == 0 {
		rec.Stripes = DefaultStripes
	}
	if err := rec.Validate(); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	v, err := model.ParseVector(rec.Vector)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if v.Total() > layout.MaxReplicas {
		return nil, status.Errorf(codes.InvalidArgument, "log: vector %s has %d replicas, limit %d", rec.Vector, v.Total(), layout.MaxReplicas)
	}
	rec.Vector = v.String()
	// Fail now, with placement's reason, if the cluster cannot hold it.
	if _, err := s.cfg.Policy.Place(s.cfg.Snapshot(), placement.Request{Vector: v, Bytes: s.cfg.Options.SegmentBytes}, rand.New(rand.NewPCG(1, 2))); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "log: cannot place vector %s: %v", rec.Vector, err)
	}
	for attempt := 0; ; attempt++ {
		last, err := s.cfg.KV.Get(ctx, []byte(keyLastID))
		var lastID uint64
		switch {
		case errors.Is(err, meta.ErrNotFound):
		case err != nil:
			return nil, grpcErr(err)
		default:
			if lastID, err = strconv.ParseUint(string(last.Value), 10, 64); err != nil {
				return nil, status.Errorf(codes.Internal, "log: corrupt %s: %v", keyLastID, err)
			}
		}
		rec.ID = lastID + 1
		var t meta.Txn
		t.If([]byte(keyLastID), last.ModRev)
		t.If(recordKey(rec.Name), 0)
		t.Put([]byte(keyLastID), []byte(strconv.FormatUint(rec.ID, 10)))
		recVal, layVal := mustJSON(rec), mustJSON(layout.Layout{})
		t.Put(recordKey(rec.Name), recVal)
		t.Put(layoutKey(rec.Name), layVal)
		rev, err := s.cfg.KV.Commit(ctx, &t)
		if err == nil {
			// Read-your-writes on this node (ListLogs, GetLog answer from
			// the cache, which the watch updates a moment later).
			s.cache.apply(string(recordKey(rec.Name)), recVal, rev, false)
			s.cache.apply(string(layoutKey(rec.Name)), layVal, rev, false)
			break
		}
		if !errors.Is(err, meta.ErrConflict) {
			return nil, grpcErr(err)
		}
		if _, gerr := s.cfg.KV.Get(ctx, recordKey(rec.Name)); gerr == nil {
			return nil, status.Errorf(codes.AlreadyExists, "log: %s exists", rec.Name)
		}
		if attempt > 100 {
			return nil, status.Error(codes.Aborted, "log: could not allocate a log ID (contention)")
		}
	}
	s.log.Info("log created", "log", rec.Name, "id", rec.ID, "vector", rec.Vector, "stripes", rec.Stripes)
	return &zlogpb.LogInfo{Record: client.RecordToProto(rec), Layout: &zlogpb.Layout{}}, nil
}

// DeleteLog removes a log's metadata; every node's garbage collection then
// drops its replicas and the hosting node steps down.
func (s *Service) DeleteLog(ctx context.Context, req *zlogpb.NameRequest) (*zlogpb.Empty, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := layout.CheckName(req.Name); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	it, err := s.cfg.KV.Get(ctx, recordKey(req.Name))
	if errors.Is(err, meta.ErrNotFound) {
		return nil, status.Errorf(codes.NotFound, "log: no log %s", req.Name)
	}
	if err != nil {
		return nil, grpcErr(err)
	}
	var t meta.Txn
	t.If(recordKey(req.Name), it.ModRev)
	t.Del(recordKey(req.Name))
	t.Del(layoutKey(req.Name))
	t.Del(hostKey(req.Name))
	rev, err := s.cfg.KV.Commit(ctx, &t)
	if err != nil {
		return nil, grpcErr(err)
	}
	// Read-your-writes on this node: the watch delivers the deletes a
	// moment later, and until then GetLog answered from the cache that the
	// log still exists. Applying them at the commit's revision makes the
	// watch's copies no-ops.
	for _, k := range [][]byte{recordKey(req.Name), layoutKey(req.Name), hostKey(req.Name)} {
		s.cache.apply(string(k), nil, rev, true)
	}
	s.log.Info("log deleted", "log", req.Name)
	return &zlogpb.Empty{}, nil
}

// maxGetLogWait bounds a GetLog long poll.
const maxGetLogWait = 10 * time.Second

// GetLog returns a log's record, layout, host and node addresses, waiting
// (up to wait_ms) for a layout of at least min_epoch.
func (s *Service) GetLog(ctx context.Context, req *zlogpb.GetLogRequest) (*zlogpb.LogInfo, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	wait := min(time.Duration(req.WaitMs)*time.Millisecond, maxGetLogWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ch := s.cache.wait()
		v, ok := s.cache.get(req.Name)
		if !ok {
			if err := layout.CheckName(req.Name); err != nil {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			if !s.existsInStore(ctx, req.Name) {
				return nil, status.Errorf(codes.NotFound, "log: no log %s", req.Name)
			}
			// Created on another node a moment ago: wait for the watch.
			select {
			case <-ch:
				continue
			case <-deadline.C:
				return nil, status.Errorf(codes.Unavailable, "log: %s not yet known on this node", req.Name)
			case <-ctx.Done():
				return nil, grpcErr(ctx.Err())
			}
		}
		if v.Layout.Epoch >= req.MinEpoch && v.HostRev != 0 || req.MinEpoch == 0 {
			return s.info(v), nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return s.info(v), nil
		case <-ctx.Done():
			return nil, grpcErr(ctx.Err())
		}
	}
}

// existsInStore reads the log's record from the metadata store itself
// (the cache may lag a creation on another node).
func (s *Service) existsInStore(ctx context.Context, name string) bool {
	_, err := s.cfg.KV.Get(ctx, recordKey(name))
	return err == nil
}

// info builds the wire view of a log.
func (s *Service) info(v view) *zlogpb.LogInfo {
	out := &zlogpb.LogInfo{Record: client.RecordToProto(v.Record), Layout: client.LayoutToProto(v.Layout), Addresses: map[string]string{}}
	if v.HostRev != 0 {
		out.Host = v.Host.Node
		s.hostMu.Lock()
		if q := s.hosted[v.Record.Name]; q != nil {
			out.Ready = q.isReady()
		}
		s.hostMu.Unlock()
	}
	add := func(n string) {
		if _, ok := out.Addresses[n]; ok || n == "" {
			return
		}
		if a, ok := s.cfg.Address(n); ok {
			out.Addresses[n] = a
		}
	}
	add(out.Host)
	add(s.cfg.Self)
	for _, seg := range v.Layout.Segments {
		for _, st := range seg.Stripes {
			for _, r := range st {
				add(r.Node)
			}
		}
	}
	return out
}

// ListLogs lists every log.
func (s *Service) ListLogs(ctx context.Context, _ *zlogpb.Empty) (*zlogpb.ListLogsResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	out := &zlogpb.ListLogsResponse{}
	for _, n := range s.cache.names() {
		if v, ok := s.cache.get(n); ok {
			out.Logs = append(out.Logs, s.info(v))
		}
	}
	return out, nil
}

// TrimLog raises a log's prefix trim point: positions below it read as
// trimmed, segments wholly below it leave the layout, and nodes reclaim
// their space. A trim point beyond the tail is refused.
//
// The tail is read after the layout, from a sequencer serving that
// layout's epoch, and the commit compares the layout: a recovery in
// between can start the next epoch below the old tail (positions handed
// out but never written), and a trim point judged against the old tail
// would then cover the new segment's acknowledged appends.
func (s *Service) TrimLog(ctx context.Context, req *zlogpb.TrimLogRequest) (*zlogpb.LogInfo, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := layout.CheckName(req.Name); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	lg := s.client.Open(req.Name, client.LogOptions{})
	for attempt := 0; attempt < 100; attempt++ {
		ri, err := s.cfg.KV.Get(ctx, recordKey(req.Name))
		if errors.Is(err, meta.ErrNotFound) {
			return nil, status.Errorf(codes.NotFound, "log: no log %s", req.Name)
		}
		if err != nil {
			return nil, grpcErr(err)
		}
		li, err := s.cfg.KV.Get(ctx, layoutKey(req.Name))
		if err != nil {
			return nil, grpcErr(err)
		}
		rec, err := decodeRecord(ri.Value)
		if err != nil {
			return nil, grpcErr(err)
		}
		lay, err := decodeLayout(li.Value)
		if err != nil {
			return nil, grpcErr(err)
		}
		if req.Before <= rec.TrimBefore {
			return &zlogpb.LogInfo{Record: client.RecordToProto(rec), Layout: client.LayoutToProto(lay)}, nil
		}
		tail, epoch, err := lg.TailAt(ctx)
		if err != nil {
			return nil, grpcErr(err)
		}
		if s.afterTrimTail != nil {
			s.afterTrimTail()
		}
		if epoch != lay.Epoch {
			// A recovery is between the layout we read and the
			// sequencer that answered: read both again.
			select {
			case <-ctx.Done():
				return nil, grpcErr(ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if req.Before > tail {
			return nil, status.Errorf(codes.InvalidArgument, "log: trim point %d is beyond the tail %d", req.Before, tail)
		}
		rec.TrimBefore = req.Before
		lay = layout.Trim(lay, req.Before)
		var t meta.Txn
		t.If(recordKey(req.Name), ri.ModRev)
		t.If(layoutKey(req.Name), li.ModRev)
		t.Put(recordKey(req.Name), mustJSON(rec))
		t.Put(layoutKey(req.Name), mustJSON(lay))
		if _, err := s.cfg.KV.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else if err != nil {
			return nil, grpcErr(err)
		}
		s.log.Info("log trimmed", "log", req.Name, "before", req.Before)
		return &zlogpb.LogInfo{Record: client.RecordToProto(rec), Layout: client.LayoutToProto(lay)}, nil
	}
	return nil, status.Error(codes.Aborted, "log: trim kept conflicting")
}

// Append is the convenience call: the node appends for the caller.
func (s *Service) Append(ctx context.Context, req *zlogpb.AppendRequest) (*zlogpb.AppendResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	pos, err := s.client.Open(req.Name, client.LogOptions{}).Append(ctx, req.Data)
	if err != nil {
		return nil, grpcErr(err)
	}
	return &zlogpb.AppendResponse{Position: pos}, nil
}

// ReadEntry is the convenience read (optionally filling a hole first).
func (s *Service) ReadEntry(ctx context.Context, req *zlogpb.ReadEntryRequest) (*zlogpb.ReadEntryResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	l := s.client.Open(req.Name, client.LogOptions{})
	e, err := l.Read(ctx, req.Position)
	if errors.Is(err, client.ErrNotWritten) && req.Fill {
		e, err = l.Fill(ctx, req.Position)
	}
	switch {
	case errors.Is(err, client.ErrNotWritten):
		return &zlogpb.ReadEntryResponse{Status: zlogpb.Status_STATUS_NOT_WRITTEN}, nil
	case errors.Is(err, client.ErrTrimmed):
		return &zlogpb.ReadEntryResponse{Status: zlogpb.Status_STATUS_TRIMMED, Kind: zlogpb.Kind_KIND_TRIM}, nil
	case err != nil:
		return nil, grpcErr(err)
	}
	return &zlogpb.ReadEntryResponse{Status: zlogpb.Status_STATUS_OK, Kind: zlogpb.Kind(e.Kind), Data: e.Data}, nil
}
