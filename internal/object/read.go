package object

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// readChunk bounds one read from an extent so a large range streams
// instead of buffering whole extents.
const readChunk = 1 << 20

type objectReader struct {
	ctx  context.Context
	l    *Layer
	refs []meta.ExtentRef
	skip int64 // bytes still to skip from the current position
	left int64 // bytes still to return
	buf  []byte
	err  error
}

func (r *objectReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if r.left == 0 {
			return 0, io.EOF
		}
		if err := r.fill(); err != nil {
			r.err = err
			return 0, err
		}
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *objectReader) fill() error {
	for len(r.refs) > 0 && r.skip >= r.refs[0].Len {
		r.skip -= r.refs[0].Len
		r.refs = r.refs[1:]
	}
	if len(r.refs) == 0 {
		return fmt.Errorf("object: extent list ends %d bytes early", r.left)
	}
	ref := r.refs[0]
	from := ref.Off + r.skip
	n := min(ref.Len-r.skip, r.left, readChunk)
	data, err := r.l.ReadExtent(r.ctx, ref.ID, from, from+n)
	if err != nil {
		return err
	}
	r.skip += n
	r.left -= n
	r.buf = data
	return nil
}

func (r *objectReader) Close() error {
	r.err = errors.New("object: reader closed")
	return nil
}

// ReadExtent returns payload bytes [from, to) of an extent, trying
// replicas in read order (replicas already marked bad last). A replica
// whose slices fail their checksum is marked bad in metadata (the Curator
// repairs it) and the next is tried; wrong bytes are never returned.
func (l *Layer) ReadExtent(ctx context.Context, id uint64, from, to int64) ([]byte, error) {
	var x meta.Extent
	if _, err := meta.GetRecord(ctx, l.kv, meta.ExtentKey(id), &x); err != nil {
		return nil, fmt.Errorf("object: extent %s: %w", meta.FormatID(id), err)
	}
	var eg meta.Egroup
	if _, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(x.Egroup), &eg); err != nil {
		return nil, fmt.Errorf("object: egroup %s of extent %s: %w", meta.FormatID(x.Egroup), meta.FormatID(id), err)
	}
	var good, bad []meta.EgroupReplica
	for _, rep := range eg.Replicas {
		if !rep.Bad {
			good = append(good, rep)
		} else {
			bad = append(bad, rep)
		}
	}
	cands := make([]meta.EgroupReplica, 0, len(good))
	byDev := map[string]meta.EgroupReplica{}
	for _, rep := range good {
		byDev[string(rep.Device)] = rep
	}
	for _, m := range l.snaps.orderReads(replicasOf(good)) {
		cands = append(cands, byDev[string(m.Device)])
	}
	// Replicas marked bad come last, as a last resort: one failed slice or
	// a lost tail marks a whole replica bad, yet the rest of it may hold
	// the only good copy of these bytes, and every slice read is verified.
	cands = append(cands, bad...)
	var errs []error
	for _, rep := range cands {
		data, err := l.rio.Read(ctx, rep.Replica(), x.Egroup, x.Off, x.Len, from, to)
		if err == nil {
			l.access.record(x.Egroup)
			l.m.readBytes.Add(float64(len(data)))
			return data, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", rep.Device, err))
		if errors.Is(err, extent.ErrCorrupt) {
			l.m.corruptReads.Inc()
			l.opts.Logger.Error("corrupt replica detected", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
			l.MarkReplicaBad(context.WithoutCancel(ctx), x.Egroup, rep.Device)
		} else {
			l.opts.Logger.Warn("replica read failed", "egroup", meta.FormatID(x.Egroup), "device", rep.Device, "err", err)
		}
	}
	return nil, fmt.Errorf("%w: egroup %s: %v", ErrNoGoodReplica, meta.FormatID(x.Egroup), errors.Join(errs...))
}

func replicasOf(rs []meta.EgroupReplica) []model.Replica {
	out := make([]model.Replica, len(rs))
	for i, r := range rs {
		out[i] = r.Replica()
	}
	return out
}

// MarkReplicaBad records that a replica failed verification.
func (l *Layer) MarkReplicaBad(ctx context.Context, egroup uint64, dev model.DeviceID) {
	for attempt := 0; attempt < 8; attempt++ {
		var eg meta.Egroup
		rev, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(egroup), &eg)
		if err != nil {
			return
		}
		changed := false
		for i := range eg.Replicas {
			if eg.Replicas[i].Device == dev && !eg.Replicas[i].Bad {
				eg.Replicas[i].Bad = true
				changed = true
			}
		}
		if !changed {
			return
		}
		var t meta.Txn
		t.If(meta.EgroupKey(egroup), rev)
		t.Put(meta.EgroupKey(egroup), meta.Encode(eg))
		if _, err := l.kv.Commit(ctx, &t); !errors.Is(err, meta.ErrConflict) {
			return
		}
	}
}
