package object

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// ExtentLocation is one extent of an object with its egroup and replicas.
type ExtentLocation struct {
	Extent    uint64               `json:"extent"`
	Offset    int64                `json:"offset"` // offset within the object
	Length    int64                `json:"length"`
	Egroup    uint64               `json:"egroup"`
	EgroupOff int64                `json:"egroup_offset"`
	State     string               `json:"state"`
	Replicas  []meta.EgroupReplica `json:"replicas"`
	// Transform is what the Curator did to the egroup's data: "zstd 0.41"
	// (stored/logical), "incompressible" (tried, did not pay), or empty.
	Transform string `json:"transform,omitempty"`
	// Shares is the extent whose bytes this one shares after dedup (0:
	// its own).
	Shares uint64 `json:"shares,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Location is the answer to `terrace object locate`.
type Location struct {
	Bucket  string           `json:"bucket"`
	Key     string           `json:"key"`
	Size    int64            `json:"size"`
	ETag    string           `json:"etag"`
	Vector  string           `json:"vector"`
	Class   string           `json:"class,omitempty"`
	Policy  string           `json:"policy"`
	Extents []ExtentLocation `json:"extents"`
	// Tiers counts replicas per tier over all extents (deduplicated by
	// egroup).
	Tiers map[model.Tier]int `json:"tiers"`
}

// Locate resolves an object's extents to egroups and replicas.
func (l *Layer) Locate(ctx context.Context, bucket, key string) (Location, error) {
	info, err := l.Head(ctx, bucket, key)
	if err != nil {
		return Location{}, err
	}
	loc := Location{Bucket: bucket, Key: key, Size: info.Size, ETag: info.ETag, Vector: info.Vector.String(),
		Class: info.Class, Policy: l.opts.Policy.Name(), Tiers: map[model.Tier]int{}}
	var off int64
	seen := map[uint64]bool{}
	for _, ref := range info.Extents {
		el := ExtentLocation{Extent: ref.ID, Offset: off, Length: ref.Len}
		off += ref.Len
		var x meta.Extent
		if _, err := meta.GetRecord(ctx, l.kv, meta.ExtentKey(ref.ID), &x); err != nil {
			el.Error = "extent record: " + err.Error()
			loc.Extents = append(loc.Extents, el)
			continue
		}
		el.Egroup, el.EgroupOff = x.Egroup, x.Off
		el.Shares = x.Shares
		var eg meta.Egroup
		if _, err := meta.GetRecord(ctx, l.kv, meta.EgroupKey(x.Egroup), &eg); err != nil {
			el.Error = "egroup record: " + err.Error()
			loc.Extents = append(loc.Extents, el)
			continue
		}
		el.State = map[meta.EgroupState]string{meta.EgroupOpen: "open", meta.EgroupSealed: "sealed"}[eg.State]
		el.Replicas = eg.Replicas
		el.Transform = TransformLabel(eg)
		if x.Shares != 0 {
			el.Transform = strings.TrimPrefix(el.Transform+", dedup", ", ")
		}
		if !seen[x.Egroup] {
			seen[x.Egroup] = true
			for _, r := range eg.Replicas {
				if !r.Bad {
					loc.Tiers[r.Tier]++
				}
			}
		}
		loc.Extents = append(loc.Extents, el)
	}
	return loc, nil
}

// TierReport summarises capacity and use per tier and device.
type TierReport struct {
	Tiers   []TierUsage   `json:"tiers"`
	Devices []DeviceUsage `json:"devices"`
}

// TierUsage is one tier's totals.
type TierUsage struct {
	Tier          model.Tier `json:"tier"`
	Devices       int        `json:"devices"`
	CapacityBytes int64      `json:"capacity_bytes"`
	UsedBytes     int64      `json:"used_bytes"`
	Egroups       int        `json:"egroups"`
	EgroupBytes   int64      `json:"egroup_bytes"`
	// HotBytes are replica bytes of egroups read within the access
	// window; the rest are cold.
	HotBytes  int64 `json:"hot_bytes"`
	ColdBytes int64 `json:"cold_bytes"`
	// PendingMoves and PendingBytes are tiering moves the Curator would
	// make now out of this tier (filled by the server).
	PendingMoves int   `json:"pending_moves"`
	PendingBytes int64 `json:"pending_bytes"`
	// LogicalBytes is what EgroupBytes would be without the Curator's
	// transformations; Savings is the difference by transform ("zstd").
	LogicalBytes int64            `json:"logical_bytes"`
	Savings      map[string]int64 `json:"savings,omitempty"`
}

// DeviceUsage is one device's state.
type DeviceUsage struct {
	model.Device
	Egroups     int   `json:"egroups"`
	EgroupBytes int64 `json:"egroup_bytes"`
	BadReplicas int   `json:"bad_replicas"`
	// LogicalBytes: EgroupBytes before transformations (docs/transforms.md).
	LogicalBytes int64            `json:"logical_bytes"`
	savings      map[string]int64 // by transform, folded into the tier
}

// Report builds the tier report from live device counters and the egroup
// map (committed bytes per device).
func (l *Layer) Report(ctx context.Context) (TierReport, error) {
	snap := l.snaps.topoSnapshot()
	perDev := map[model.DeviceID]*DeviceUsage{}
	var rep TierReport
	for _, d := range snap.Devices {
		rep.Devices = append(rep.Devices, DeviceUsage{Device: d})
	}
	for i := range rep.Devices {
		perDev[rep.Devices[i].ID] = &rep.Devices[i]
	}
	hot := map[uint64]bool{}
	cutoff := l.opts.Now().Add(-l.opts.AccessWindow).UnixNano()
	ap := []byte(meta.PrefixAccess)
	if items, err := l.kv.Scan(ctx, ap, meta.PrefixEnd(ap), 0); err == nil {
		for _, it := range items {
			var a meta.Access
			if meta.Decode(it.Value, &a) == nil && a.Atime >= cutoff {
				if id, err := meta.ParseID(it.Key); err == nil {
					hot[id] = true
				}
			}
		}
	}
	hotDev := map[model.DeviceID]int64{}
	start := []byte(meta.PrefixEgroup)
	end := meta.PrefixEnd(start)
	for {
		items, err := l.kv.Scan(ctx, start, end, 1024)
		if err != nil {
			return rep, err
		}
		for _, it := range items {
			var eg meta.Egroup
			if err := meta.Decode(it.Value, &eg); err != nil {
				return rep, err
			}
			id, _ := meta.ParseID(it.Key)
			for _, r := range eg.Replicas {
				du := perDev[r.Device]
				if du == nil {
					continue
				}
				if r.Bad {
					du.BadReplicas++
					continue
				}
				du.Egroups++
				phys := fileSize(eg)
				du.EgroupBytes += phys
				if du.savings == nil {
					du.savings = map[string]int64{}
				}
				// What this file stands for untransformed: one replica of
				// the plain data, or for a strip its share of the vector's
				// replicas of it (n/over of the plain bytes).
				n, over := int64(1), int64(1)
				if eg.EC != nil {
					n, over = int64(max(eg.Vector.Total(), 1)), int64(len(eg.Replicas))
				}
				plain := eg.Size
				if eg.Codec != "" && eg.Logical > eg.Size {
					plain = eg.Logical
					du.savings[eg.Codec] += (eg.Logical - eg.Size) * n / over
				}
				if eg.EC != nil {
					du.savings["ec"] += eg.Size*n/over - phys
				}
				logical := plain * n / over
				du.LogicalBytes += logical
				if hot[id] {
					hotDev[r.Device] += fileSize(eg)
				}
			}
		}
		if len(items) < 1024 {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	byTier := map[model.Tier]*TierUsage{}
	for _, du := range rep.Devices {
		tu := byTier[du.Tier]
		if tu == nil {
			tu = &TierUsage{Tier: du.Tier}
			byTier[du.Tier] = tu
		}
		tu.Devices++
		tu.CapacityBytes += du.CapacityBytes
		tu.UsedBytes += du.UsedBytes
		tu.Egroups += du.Egroups
		tu.EgroupBytes += du.EgroupBytes
		tu.HotBytes += hotDev[du.ID]
		tu.LogicalBytes += du.LogicalBytes
		for k, v := range du.savings {
			if tu.Savings == nil {
				tu.Savings = map[string]int64{}
			}
			tu.Savings[k] += v
		}
		tu.ColdBytes += du.EgroupBytes - hotDev[du.ID]
	}
	tiers := make([]model.Tier, 0, len(byTier))
	for t := range byTier {
		tiers = append(tiers, t)
	}
	model.SortTiers(tiers)
	for _, t := range tiers {
		rep.Tiers = append(rep.Tiers, *byTier[t])
	}
	sort.Slice(rep.Devices, func(i, j int) bool { return rep.Devices[i].ID < rep.Devices[j].ID })
	return rep, nil
}

// SetReplication changes an object's replication vector (OctopusFS
// setReplication). The object's bytes are rewritten into egroups of the
// new vector in the background; the switch is a compare-and-swap on the
// object record, so a concurrent overwrite wins and the move is dropped.
// The returned channel yields the outcome.
func (l *Layer) SetReplication(ctx context.Context, bucket, key string, v model.Vector) (<-chan error, error) {
	if err := writable(bucket); err != nil {
		return nil, err
	}
	if err := l.checkVectorTiers(v); err != nil {
		return nil, err
	}
	info, rev, err := l.head(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	if info.Vector.Equal(v) {
		done <- nil
		return done, nil
	}
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		done <- l.rewrite(context.WithoutCancel(ctx), info, rev, v)
	}()
	return done, nil
}

// rewrite copies an object's bytes into new egroups under vector v and
// switches the object record with compare-and-swap.
func (l *Layer) rewrite(ctx context.Context, info ObjectInfo, rev int64, v model.Vector) error {
	if err := l.pool.enter(ctx); err != nil {
		return err
	}
	defer l.pool.leave()
	_, rc, err := l.Get(ctx, info.Bucket, info.Key, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	w := l.newWriter(v)
	if b, _, err := l.GetBucket(ctx, info.Bucket); err == nil {
		w.class = poolClass(b)
	}
	if err := w.write(ctx, rc, info.Size); err != nil {
		w.abort(ctx)
		return err
	}
	o := info.Object
	o.Vector = v
	o.Extents = w.refs()
	var h meta.Txn
	if err := l.inPlaceOps(ctx, &h, info.Bucket, info.Key, info, rev, &o); err != nil {
		w.abort(ctx)
		return err
	}
	err = w.commit(ctx, func(t *meta.Txn) {
		t.Cmps = append(t.Cmps, h.Cmps...)
		t.Ops = append(t.Ops, h.Ops...)
	})
	if err != nil {
		w.abort(ctx)
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("object: set-replication of %s/%s dropped: object changed concurrently", info.Bucket, info.Key)
		}
		return err
	}
	w.release()
	l.opts.Logger.Info("replication changed", "bucket", info.Bucket, "key", info.Key, "vector", v.String())
	return nil
}

// TransformLabel says what the Curator's transformations did to an
// egroup, for operators (docs/transforms.md).
func TransformLabel(eg meta.Egroup) string {
	if eg.EC != nil {
		s := fmt.Sprintf("ec %d+%d", eg.EC.K, eg.EC.M)
		if c := TransformLabel(meta.Egroup{Codec: eg.Codec, Logical: eg.Logical, Size: eg.Size, Incompressible: eg.Incompressible}); c != "" {
			s = c + ", " + s
		}
		return s
	}
	switch {
	case eg.Codec != "" && eg.Logical > 0:
		return fmt.Sprintf("%s %.2f", eg.Codec, float64(eg.Size)/float64(eg.Logical))
	case eg.Codec != "":
		return eg.Codec
	case eg.Incompressible:
		return "incompressible"
	}
	return ""
}
