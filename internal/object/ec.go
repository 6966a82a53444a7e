package object

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/extent"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/transform"
)

// Erasure-coded egroups (docs/design/0010). An EC egroup's record lists
// its K+M strips in order as Replicas (data strips first); each strip is a
// replica-format file holding StripLen payload bytes in checksummed
// slices, so scrubbing, start-up recovery, orphan detection and removal
// treat strip files like replica files. The egroup's layout — the file
// one replica would be — is the data strips' payloads concatenated.

// fileSize is the length of each replica file of an egroup: its
// committed size, or one strip file's for an erasure-coded egroup.
func fileSize(eg meta.Egroup) int64 {
	if eg.EC != nil {
		return extent.EncodedLen(eg.EC.StripLen)
	}
	return eg.Size
}

// FileSize is fileSize for other packages (the Curator's scrub).
func FileSize(eg meta.Egroup) int64 { return fileSize(eg) }

func shapeOf(eg meta.Egroup) transform.ECShape {
	return transform.ECShape{K: eg.EC.K, M: eg.EC.M}
}

// readLayout returns bytes [start, end) of an erasure-coded egroup's
// layout. An intact stripe is read from the data strips covering the
// range (each read verified slice by slice); if one of them cannot be
// read, the data strips are reconstructed from any K good strips (a
// corrupt strip is marked bad for the Curator to rebuild).
func (l *Layer) readLayout(ctx context.Context, id uint64, eg *meta.Egroup, start, end int64) ([]byte, error) {
	if start < 0 || end > eg.Size || start > end {
		return nil, fmt.Errorf("object: read [%d,%d) outside erasure-coded egroup %s of %d bytes", start, end, meta.FormatID(id), eg.Size)
	}
	sl := eg.EC.StripLen
	// The data strips covering the range, read in parallel (each on its
	// own device).
	type seg struct {
		j, lo, hi int64
		b         []byte
		err       error
	}
	var segs []*seg
	degraded := false
	for j := start / sl; j < int64(eg.EC.K) && j*sl < end; j++ {
		if eg.Replicas[j].Bad {
			degraded = true
			break
		}
		segs = append(segs, &seg{j: j, lo: max(start, j*sl) - j*sl, hi: min(end, (j+1)*sl) - j*sl})
	}
	if !degraded {
		l.eachParallel(len(segs), func(i int) {
			sg := segs[i]
			sg.b, sg.err = l.rio.Read(ctx, eg.Replicas[sg.j].Replica(), id, 0, sl, sg.lo, sg.hi)
		})
		out := make([]byte, 0, end-start)
		for _, sg := range segs {
			if sg.err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				l.stripFailed(ctx, id, eg.Replicas[sg.j], sg.err)
				degraded = true
				continue
			}
			out = append(out, sg.b...)
		}
		if !degraded {
			return out, nil
		}
	}
	l.m.degradedReads.Inc()
	strips, err := l.readStrips(ctx, id, eg, eg.EC.K)
	if err != nil {
		return nil, err
	}
	if err := transform.Reconstruct(shapeOf(*eg), strips, true); err != nil {
		return nil, fmt.Errorf("%w: egroup %s: %v", ErrNoGoodReplica, meta.FormatID(id), err)
	}
	out := make([]byte, 0, end-start)
	for j := start / sl; j < int64(eg.EC.K) && j*sl < end; j++ {
		lo, hi := max(start, j*sl)-j*sl, min(end, (j+1)*sl)-j*sl
		out = append(out, strips[j][lo:hi]...)
	}
	return out, nil
}

// stripFailed logs a failed strip read and marks a corrupt or missing
// strip bad, so that the Curator rebuilds it (it rebuilds only strips
// marked bad or on failed, draining or gone devices). A missing file on
// a device that is up is a lost strip too: a remote-tier object gone, a
// file removed by hand. MarkReplicaBad marks it only while the current
// record still lists the device (a strip moved by a rebuild is not).
func (l *Layer) stripFailed(ctx context.Context, id uint64, r meta.EgroupReplica, err error) {
	if errors.Is(err, extent.ErrCorrupt) || errors.Is(err, device.ErrNotExist) {
		if errors.Is(err, extent.ErrCorrupt) {
			l.m.corruptReads.Inc()
		}
		l.opts.Logger.Error("corrupt or missing strip detected", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
		l.MarkReplicaBad(context.WithoutCancel(ctx), id, r.Device)
		return
	}
	l.opts.Logger.Warn("strip read failed; reconstructing", "egroup", meta.FormatID(id), "device", r.Device, "err", err)
}

// readStrips reads whole strips, verified, until want of them are in
// hand (want = K+M reads them all); unreadable ones are nil. It fails
// only if fewer than K could be read.
func (l *Layer) readStrips(ctx context.Context, id uint64, eg *meta.Egroup, want int) ([][]byte, error) {
	sl := eg.EC.StripLen
	strips := make([][]byte, len(eg.Replicas))
	readErrs := make([]error, len(eg.Replicas))
	got := 0
	var errs []error
	// Read want strips in parallel; if some fail, the next candidates.
	next := 0
	for got < want && next < len(eg.Replicas) {
		var batch []int
		for ; next < len(eg.Replicas) && len(batch) < want-got; next++ {
			if !eg.Replicas[next].Bad {
				batch = append(batch, next)
			}
		}
		if len(batch) == 0 {
			break
		}
		l.eachParallel(len(batch), func(k int) {
			i := batch[k]
			strips[i], readErrs[i] = l.rio.Read(ctx, eg.Replicas[i].Replica(), id, 0, sl, 0, sl)
		})
		for _, i := range batch {
			if err := readErrs[i]; err != nil {
				strips[i] = nil
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				l.stripFailed(ctx, id, eg.Replicas[i], err)
				errs = append(errs, fmt.Errorf("strip %d on %s: %w", i, eg.Replicas[i].Device, err))
				continue
			}
			got++
		}
	}
	if got < eg.EC.K {
		return nil, fmt.Errorf("%w: egroup %s: %d of %d+%d strips readable: %v", ErrNoGoodReplica, meta.FormatID(id), got, eg.EC.K, eg.EC.M, errors.Join(errs...))
	}
	return strips, nil
}

// readEC returns payload bytes [from, to) of a plain extent of an
// erasure-coded egroup.
func (l *Layer) readEC(ctx context.Context, loc *extentLoc, from, to int64) ([]byte, error) {
	x := loc.x
	if from < 0 || to > x.Len || from > to {
		return nil, fmt.Errorf("object: read [%d,%d) outside extent %s of %d bytes", from, to, meta.FormatID(loc.id), x.Len)
	}
	if from == to {
		return nil, nil
	}
	start, end, first := extent.EncodedSpan(x.Len, from, to)
	raw, err := l.readLayout(ctx, x.Egroup, loc.ec, x.Off+start, x.Off+end)
	if err != nil {
		return nil, err
	}
	payload, err := extent.DecodeSpan(raw, first, x.Len)
	if err != nil {
		return nil, fmt.Errorf("%w: egroup %s: %v", ErrNoGoodReplica, meta.FormatID(x.Egroup), err)
	}
	lo := from - first*extent.SliceSize
	if int64(len(payload)) < lo+(to-from) {
		// A short layout read (a strip shorter than its record says)
		// decodes to fewer slices than asked for: an error, not a panic.
		return nil, fmt.Errorf("%w: egroup %s: decoded %d bytes, need %d", ErrNoGoodReplica, meta.FormatID(x.Egroup), len(payload), lo+(to-from))
	}
	l.access.record(x.Egroup)
	l.m.readBytes.Add(float64(to - from))
	return payload[lo : lo+(to-from)], nil
}

// readStoredEC returns a compressed extent's stored frame from an
// erasure-coded egroup.
func (l *Layer) readStoredEC(ctx context.Context, loc *extentLoc) ([]byte, error) {
	raw := *loc
	raw.x.Codec, raw.x.Len = "", loc.x.Stored
	return l.readEC(ctx, &raw, 0, loc.x.Stored)
}

// writeStripes writes staged extents as erasure-coded egroups of shape s:
// laid out as a replica file would hold them, at most EgroupMaxBytes per
// egroup, cut into strips, each strip written to its own device and
// synced, every strip read back and verified, and only then the egroup
// record committed (sealed). It returns the new extent records (in the
// order of staged) for the caller to switch.
func (l *Layer) writeStripes(ctx context.Context, s transform.ECShape, v, place model.Vector, staged []stagedExtent) ([]meta.Extent, error) {
	recs := make([]meta.Extent, 0, len(staged))
	for len(staged) > 0 {
		var layout []byte
		n := 0
		for n < len(staged) && (n == 0 || int64(len(layout))+extent.EncodedLen(int64(len(staged[n].bytes))) <= l.opts.EgroupMaxBytes) {
			st := staged[n]
			x := st.rec
			x.Off = int64(len(layout))
			layout = extent.Encode(layout, st.bytes)
			recs = append(recs, x)
			n++
		}
		id, eg, err := l.writeStripe(ctx, s, v, place, layout, recs[len(recs)-n:])
		if err != nil {
			return nil, err
		}
		for i := len(recs) - n; i < len(recs); i++ {
			recs[i].Egroup = id
			recs[i].Ctime = eg.Mtime
		}
		staged = staged[n:]
	}
	return recs, nil
}

func (l *Layer) writeStripe(ctx context.Context, s transform.ECShape, v, place model.Vector, layout []byte, xs []meta.Extent) (uint64, meta.Egroup, error) {
	strips, err := transform.Encode(s, layout)
	if err != nil {
		return 0, meta.Egroup{}, err
	}
	sl := int64(len(strips[0]))
	fileLen := extent.EncodedLen(sl)
	reps, err := l.placeStrips(s, place, fileLen)
	if err != nil {
		return 0, meta.Egroup{}, err
	}
	id, err := l.egroupSeq.Next(ctx)
	if err != nil {
		return 0, meta.Egroup{}, err
	}
	// Registered before the first strip file exists, until the record
	// commits: the orphan sweep (on every node holding a strip) leaves a
	// held egroup's files alone, however long the strips or the commit
	// take.
	held := &openEgroup{id: id}
	l.inflight.add(held)
	defer runtime.KeepAlive(held)
	cleanup := func() {
		for _, r := range reps {
			_ = l.rio.Remove(context.WithoutCancel(ctx), r, id)
		}
	}
	// Each strip goes to its own device: written, synced and verified in
	// parallel.
	errs := make([]error, len(reps))
	l.eachParallel(len(reps), func(i int) { errs[i] = l.writeStrip(ctx, reps[i], id, strips[i]) })
	for i, err := range errs {
		if err != nil {
			cleanup()
			return 0, meta.Egroup{}, fmt.Errorf("object: write strip %d of egroup %s on %s: %w", i, meta.FormatID(id), reps[i].Device, err)
		}
	}
	l.snaps.placed(reps, fileLen)
	eg := meta.Egroup{State: meta.EgroupSealed, Size: int64(len(layout)), Vector: v, Mtime: l.opts.Now().UnixNano(), Writer: l.opts.Node,
		EC: &meta.ECLayout{K: s.K, M: s.M, StripLen: sl}}
	var logical int64
	for _, x := range xs {
		logical += x.Len
		if x.Codec != "" && eg.Codec == "" {
			eg.Codec = x.Codec
		}
	}
	eg.Logical = logicalIf(eg.Codec, logical)
	for _, r := range reps {
		eg.Replicas = append(eg.Replicas, meta.EgroupReplica{Device: r.Device, Node: r.Node, Tier: r.Tier})
	}
	var t meta.Txn
	t.If(meta.EgroupKey(id), 0)
	t.Put(meta.EgroupKey(id), meta.Encode(eg))
	if _, err := l.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			cleanup() // certainly not committed
		} else {
			// The commit may still land: keep the strips, held a while;
			// if no record appears, the orphan sweep removes them.
			l.inflight.pin(id, time.Now().Add(MinOrphanSweepGrace))
		}
		return 0, meta.Egroup{}, err
	}
	l.m.egroupsCreated.Inc()
	return id, eg, nil
}

// writeStrip creates one strip file, makes it durable and verifies it.
func (l *Layer) writeStrip(ctx context.Context, r model.Replica, id uint64, strip []byte) error {
	if err := l.rio.Create(ctx, r, id); err != nil {
		return err
	}
	enc := extent.Encode(make([]byte, 0, extent.EncodedLen(int64(len(strip)))), strip)
	if err := l.rio.AppendSync(ctx, r, id, 0, enc); err != nil {
		return err
	}
	return l.rio.Verify(ctx, r, id, int64(len(enc)))
}

// placeStrips chooses K+M distinct devices (distinct nodes where the
// cluster has enough) on the tier the data occupies now, or anywhere if
// that tier has too few.
func (l *Layer) placeStrips(s transform.ECShape, place model.Vector, fileLen int64) ([]model.Replica, error) {
	var tier model.Tier = model.TierAny
	best := 0
	for t, n := range place.Counts {
		if n > best || (n == best && t < tier) {
			tier, best = t, n
		}
	}
	snap := l.snaps.get()
	l.snaps.mu.Lock()
	defer l.snaps.mu.Unlock()
	reps, err := l.opts.Policy.Place(snap, placement.Request{Vector: model.Vector{Counts: map[model.Tier]int{tier: s.K + s.M}}, Bytes: fileLen}, l.snaps.rng)
	if err != nil && tier != model.TierAny {
		reps, err = l.opts.Policy.Place(snap, placement.Request{Vector: model.Vector{Counts: map[model.Tier]int{model.TierAny: s.K + s.M}}, Bytes: fileLen}, l.snaps.rng)
	}
	if err != nil {
		if errors.Is(err, placement.ErrNoSuitableDevices) {
			return nil, fmt.Errorf("%w: %d strips need %d distinct devices: %v", ErrInsufficientStorage, s.K+s.M, s.K+s.M, err)
		}
		return nil, err
	}
	return reps, nil
}

// RebuildStrips reconstructs the strips of erasure-coded egroup id that
// sit on the devices in replace (keys) onto new devices (values): the
// stripe is decoded from any K good strips, each new strip is written,
// synced and verified, the record is switched with compare-and-swap
// against modRev, and only then are the old strip files removed (best
// effort: their devices may be gone). Reconstructed parity is checked
// against the data before anything is written.
func (l *Layer) RebuildStrips(ctx context.Context, id uint64, modRev int64, replace map[model.DeviceID]model.Replica) (int64, error) {
	eg, rev, err := l.Egroup(ctx, id)
	if err != nil {
		return 0, err
	}
	if rev != modRev {
		return 0, fmt.Errorf("%w: egroup %s", ErrStale, meta.FormatID(id))
	}
	if eg.EC == nil {
		return 0, fmt.Errorf("object: egroup %s is not erasure coded", meta.FormatID(id))
	}
	slots := map[int]model.Replica{}
	for i, r := range eg.Replicas {
		if dst, ok := replace[r.Device]; ok {
			slots[i] = dst
		}
	}
	if len(slots) != len(replace) {
		return 0, fmt.Errorf("%w: egroup %s no longer has strips on every device to replace", ErrStale, meta.FormatID(id))
	}
	// Every strip not marked bad is read, the ones being replaced
	// included: a strip on a draining device is good and may be needed
	// to reach K; one on a failed or gone device fails its read and is
	// reconstructed like a missing one (every read is verified).
	strips, err := l.readStrips(ctx, id, &eg, len(eg.Replicas))
	if err != nil {
		return 0, err
	}
	s := shapeOf(eg)
	if err := transform.Reconstruct(s, strips, false); err != nil {
		return 0, err
	}
	if ok, err := transform.VerifyParity(s, strips); err != nil || !ok {
		return 0, fmt.Errorf("object: egroup %s: reconstructed stripe fails its parity check (%v)", meta.FormatID(id), err)
	}
	// Claim the stripe before writing: a second rebuild of it (a master
	// that took over, a node's queue) decided from the same revision
	// stops here instead of truncating strips this one writes and lists.
	if modRev, err = l.fenceEgroup(ctx, id, modRev); err != nil {
		return 0, err
	}
	next := eg
	next.Replicas = append([]meta.EgroupReplica(nil), eg.Replicas...)
	var written []model.Replica
	idx := make([]int, 0, len(slots))
	for i := range slots {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		dst := slots[i]
		if err := l.writeStrip(ctx, dst, id, strips[i]); err != nil {
			for _, w := range append(written, dst) {
				if !l.ReplicaListed(context.WithoutCancel(ctx), id, w.Device) {
					_ = l.rio.Remove(context.WithoutCancel(ctx), w, id)
				}
			}
			return 0, fmt.Errorf("object: rebuild strip %d of egroup %s on %s: %w", i, meta.FormatID(id), dst.Device, err)
		}
		written = append(written, dst)
		next.Replicas[i] = meta.EgroupReplica{Device: dst.Device, Node: dst.Node, Tier: dst.Tier}
	}
	if err := l.SwitchEgroup(ctx, id, modRev, next); err != nil {
		for _, w := range written {
			if !l.ReplicaListed(context.WithoutCancel(ctx), id, w.Device) {
				_ = l.rio.Remove(context.WithoutCancel(ctx), w, id)
			}
		}
		return 0, err
	}
	for _, i := range idx {
		old := eg.Replicas[i]
		if old.Device == next.Replicas[i].Device {
			continue // rebuilt in place (the file was lost, the device is fine)
		}
		if err := l.rio.Remove(ctx, old.Replica(), id); err != nil {
			l.opts.Logger.Debug("remove replaced strip (device may be gone)", "egroup", meta.FormatID(id), "device", old.Device, "err", err)
		}
	}
	l.m.stripsRebuilt.Add(float64(len(idx)))
	return fileSize(eg) * int64(len(idx)), nil
}

// VerifyStripe reads every strip of an erasure-coded egroup (each slice
// verified; a corrupt strip is marked bad) and checks the parity strips
// against the data strips. It returns the number of strips that could not
// be read and whether the parity matched (only checked when all strips
// were read).
func (l *Layer) VerifyStripe(ctx context.Context, id uint64) (bad int, parityOK bool, err error) {
	eg, _, err := l.Egroup(ctx, id)
	if err != nil {
		return 0, false, err
	}
	if eg.EC == nil {
		return 0, false, fmt.Errorf("object: egroup %s is not erasure coded", meta.FormatID(id))
	}
	strips, err := l.readStrips(ctx, id, &eg, len(eg.Replicas))
	if err != nil && strips == nil && ctx.Err() != nil {
		return 0, false, err
	}
	for i, st := range strips {
		if st == nil && !eg.Replicas[i].Bad {
			bad++
		}
	}
	if strips == nil {
		return len(eg.Replicas), false, err
	}
	for _, st := range strips {
		if st == nil {
			return bad, false, nil
		}
	}
	ok, err := transform.VerifyParity(shapeOf(eg), strips)
	if err == nil && !ok {
		l.opts.Logger.Error("CONSISTENCY: stripe parity does not match its data", "egroup", meta.FormatID(id))
	}
	return bad, ok, err
}

// eachParallel runs fn(0..n-1) concurrently (strips live on distinct
// devices, so their reads overlap instead of queueing).
func (l *Layer) eachParallel(n int, fn func(i int)) {
	if n == 1 {
		fn(0)
		return
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(i)
		}()
	}
	wg.Wait()
}
