package curator

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// The map stage of a scan, runnable on any node (Curator §3.1). A
// partition is one sixteenth of a map's IDs: IDs come from a sequence
// (1, 2, 3, … in blocks), so the master splits the range between the
// lowest and the highest ID in use into 16 equal ranges (idBounds), the
// first and last open-ended. "egroups/3" reads the egroup records of its
// range and the access records of the same range and joins them map-side
// (both maps are keyed by egroup ID, so the partitions line up and the
// join needs no shuffle); "extents/a" reads the extent records of its
// range. The node that runs a partition decodes the records and ships the
// decoded output — the master never sees raw records of a partition
// another node mapped; egroups and extents travel in the compact form the
// master keeps (WriteCompactMapStream), so the worker also does the
// reduce's first step — and the master's reduce joins the partitions'
// outputs. The master runs the same function for the partitions it
// keeps, so a partition's output does not depend on where it ran.
//
// A full scan also maps the owner maps — objects, versions and upload
// parts, keyed by bucket and name — in partitions of key ranges
// ("objects/3" holds the keys in [PREFIX+From, PREFIX+To)), cut where the
// last full scan's records divide into equal parts, or at bucket
// boundaries before there is one (ownerPartitions). The worker
// decodes each record and ships only what the reduce uses: its bucket,
// the extent IDs it references, and whether it is history to collect
// (the filter stage of Curator §3.1). A record moves only from the object
// map to the version map, so every object partition is mapped before any
// version partition (scanOwners), and all of them read one snapshot.

// MapRecord is one record of a partition's map output: an egroup with its
// access record (nil: never read) or an extent, with the metadata revision
// it was read at.
type MapRecord struct {
	ID     uint64 // for an owner record: its position in the partition, from 1
	Rev    int64
	Egroup *meta.Egroup
	Access *meta.Access
	Extent *meta.Extent
	Owner  *OwnerRecord
	// compact, when its shape is set, is an egroup already in the form
	// the master keeps (a worker's compact stream; Egroup and Access are
	// then nil); compactExtent, when isExtent is set, is such an extent
	// with its fingerprint (Extent nil). Not sent: they exist on the
	// master only.
	compact       egroupRec
	compactExtent extentRec
	compactFP     []byte
	isExtent      bool
	// isRef marks a reference a shuffle's reduce joined (shuffle.go): to
	// extent ID, at scan-order position refSeq, from bucket refBucket.
	isRef     bool
	refSeq    uint32
	refBucket string
	// shuffled, alone in a record, is what a shuffled map sent; agg is
	// an egroup reduce's aggregate of egroup ID.
	shuffled *shuffled
	agg      *egroupAgg
}

// OwnerRecord is an object, version or upload part record as the reduce
// of a full scan needs it.
type OwnerRecord struct {
	// Bucket holds the record ("" for an upload part: parts set no
	// bucket's policy or ownership).
	Bucket string
	// Extents are the IDs of the extents it references, in its order.
	Extents []uint64
	// History is set, with Key, when the record is history to collect: a
	// tombstone in the object map, or the first version of a key the
	// version map keeps only for snapshots.
	History bool
	Key     string
	// Cut, alone in a record, is a sample of the partition's keys (every
	// ownerCutEvery-th record; the key after the map's prefix, a version
	// key without its sequence number so that a key's versions are never
	// split): where the next full scan may cut the map.
	Cut string
}

// ownerCutEvery is how many owner records one cut point samples.
var ownerCutEvery = 1024

// MapOutput is a partition's map output: its records and how many
// metadata records the map read to produce them.
type MapOutput struct {
	Part    string
	Records []MapRecord
	Read    int
}

// PageScanner is the part of meta.KV the map stage reads through.
type PageScanner = pageScanner

// Partition is one sixteenth of a map's ID space: the records whose IDs
// are in [Lo, Hi]. Name is "egroups/H" or "extents/H", H the hex index.
// An owner map's partition ("objects/H", "versions/H", "uploads/H") is
// instead the records of the buckets in [From, To) (To "": through the
// end of the map).
type Partition struct {
	Name     string `json:"name"`
	Lo, Hi   uint64
	From, To string
	// Rev, when set, is the metadata revision to read the partition at:
	// a full scan reads the owner maps as of one snapshot (scanOwners),
	// and a worker reads the master's snapshot from its own member.
	Rev int64
	// Shuffle, when set, makes the partition's map part of a shuffle
	// (shuffle.go): an owner partition sends its references to the
	// extent partitions' reducers, an extent partition is reduced.
	Shuffle *ShuffleSpec `json:"shuffle,omitempty"`
}

// ownerMaps are the maps that reference extents, in the order a full scan
// reads them: references move from upload parts to objects and from
// objects to versions, never back, so a store read without a snapshot
// (scanOwners) sees a moving reference at one place at least.
var ownerMaps = []string{"uploads", "objects", "versions"}

// ownerPrefix is the key prefix of an owner map.
func ownerPrefix(mapName string) string {
	switch mapName {
	case "objects":
		return meta.PrefixObject
	case "versions":
		return meta.PrefixVersion
	}
	return meta.PrefixUpload
}

func isOwnerMap(mapName string) bool { return mapName != "egroups" && mapName != "extents" }

// ownerPartitions splits an owner map into up to 16 partitions that tile
// it: the first starts at the beginning of the map and the last runs to
// its end, whatever keys exist by the time it is read. With cut points
// from the last full scan (sampled every ownerCutEvery records, in key
// order) the map is cut at their quantiles, so the partitions hold about
// equal numbers of records even in one big bucket; without (the first
// scan, or a map too small to sample 16 times), at bucket boundaries, in
// runs of equal bucket counts. Keys are PREFIX + bucket + NUL + name, so
// a bucket boundary ("b") falls before all of a bucket's keys, and a cut
// ("b" NUL "name") before all of that name's versions.
func ownerPartitions(mapName string, buckets, cuts []string) []Partition {
	const hex = "0123456789abcdef"
	var bounds []string
	if len(cuts) >= 16 {
		for i := 1; i < 16; i++ {
			bounds = append(bounds, cuts[i*len(cuts)/16])
		}
	} else {
		buckets = slices.Clone(buckets)
		slices.Sort(buckets)
		buckets = slices.Compact(buckets)
		n := min(len(buckets), 16)
		for i := 1; i < n; i++ {
			bounds = append(bounds, buckets[i*len(buckets)/n])
		}
	}
	slices.Sort(bounds)
	bounds = slices.Compact(bounds)
	bounds = slices.DeleteFunc(bounds, func(b string) bool { return b == "" })
	out := make([]Partition, len(bounds)+1)
	for i := range out {
		out[i].Name = mapName + "/" + hex[i:i+1]
		if i > 0 {
			out[i].From = bounds[i-1]
			out[i-1].To = bounds[i-1]
		}
	}
	return out
}

// maxKeptCuts is how many of a map's sampled cut points the master keeps
// (and stores for the next master): evenly spaced samples of the sorted
// cut points. ownerPartitions takes the 16-quantiles, and the i/16
// quantile of 256 evenly spaced samples is the i/16 quantile of all of
// them (cuts[16i·n/256] = cuts[i·n/16]), so keeping 256 changes no
// partition.
const maxKeptCuts = 256

// thinCuts returns at most maxKeptCuts evenly spaced cut points of cuts.
func thinCuts(cuts []string) []string {
	if len(cuts) <= maxKeptCuts {
		return cuts
	}
	out := make([]string, maxKeptCuts)
	for j := range out {
		out[j] = cuts[j*len(cuts)/maxKeptCuts]
	}
	return out
}

// ownerCutsKey holds the cut points of an owner map that the last full
// scan sampled, thinned (thinCuts): a new master's first full scan cuts
// the maps where the previous master's last one sampled them, instead of
// at bucket boundaries.
func ownerCutsKey(mapName string) []byte { return []byte(meta.PrefixJob + "c/" + mapName) }

// storedCuts is the record under ownerCutsKey.
type storedCuts struct {
	Cuts []string `json:"cuts"`
}

// maxCutBytes bounds one stored cut point: a bucket name, a NUL and an
// object key (S3 keys are at most 1,024 bytes).
const maxCutBytes = 2048

// check validates stored cut points read back from the metadata store.
// They only balance partitions (any bounds tile the map), but a record
// that is not what a scan wrote is ignored rather than trusted.
func (sc storedCuts) check() error {
	if len(sc.Cuts) > maxKeptCuts {
		return fmt.Errorf("%d cut points, at most %d", len(sc.Cuts), maxKeptCuts)
	}
	for i, cut := range sc.Cuts {
		switch {
		case cut == "" || len(cut) > maxCutBytes:
			return fmt.Errorf("cut point %d is empty or longer than %d bytes", i, maxCutBytes)
		case i > 0 && cut < sc.Cuts[i-1]:
			return fmt.Errorf("cut point %d is out of order", i)
		}
	}
	return nil
}

// cutsFor returns the cut points to partition an owner map by: the last
// full scan's, kept in memory, or — on a master that has not run a full
// scan yet — those the previous master stored.
func (c *Curator) cutsFor(ctx context.Context, mapName string) []string {
	c.mu.Lock()
	cuts, ok := c.ownerCuts[mapName]
	c.mu.Unlock()
	if ok {
		return cuts
	}
	var sc storedCuts
	if _, err := meta.GetRecord(ctx, c.kv, ownerCutsKey(mapName), &sc); err != nil {
		if !errors.Is(err, meta.ErrNotFound) {
			c.log.Warn("curator: read stored cut points; cutting at bucket boundaries", "map", mapName, "err", err)
		}
		return nil
	}
	if err := sc.check(); err != nil {
		c.log.Warn("curator: stored cut points ignored", "map", mapName, "err", err)
		return nil
	}
	return sc.Cuts
}

// keepCuts keeps the cut points a full scan sampled for the next one,
// thinned, in memory and in the metadata store (best effort: without
// them a new master cuts at bucket boundaries).
func (c *Curator) keepCuts(ctx context.Context, mapName string, cuts []string) {
	cuts = thinCuts(cuts)
	c.mu.Lock()
	if c.ownerCuts == nil {
		c.ownerCuts = map[string][]string{}
	}
	c.ownerCuts[mapName] = cuts
	c.mu.Unlock()
	var t meta.Txn
	t.Put(ownerCutsKey(mapName), meta.Encode(storedCuts{Cuts: cuts}))
	if _, err := c.kv.Commit(ctx, &t); err != nil {
		c.log.Warn("curator: store cut points", "map", mapName, "err", err)
	}
}

// bucketOfBound is the bucket part of a partition bound ("b" or
// "b" NUL "name"), and whether the bound is a whole bucket's start.
func bucketOfBound(b string) (bucket string, whole bool) {
	bucket, _, cut := strings.Cut(b, "\x00")
	return bucket, !cut
}

// holdsBucket reports whether records of bucket can lie in the owner
// partition's key range.
func (p Partition) holdsBucket(bucket string) bool {
	if lo, _ := bucketOfBound(p.From); bucket < lo {
		return false
	}
	if p.To == "" {
		return true
	}
	hi, whole := bucketOfBound(p.To)
	return bucket < hi || !whole && bucket == hi
}

// partitionsOf splits a map whose IDs present lie in [lo, hi] into its 16
// partitions of equal ID ranges; the first one also takes every ID below
// lo and the last every ID above hi, so the partitions tile the ID space.
func partitionsOf(mapName string, lo, hi uint64) []Partition {
	const hex = "0123456789abcdef"
	hi = max(hi, lo)
	step := (hi-lo)/16 + 1
	out := make([]Partition, 16)
	for i := range out {
		out[i] = Partition{Name: mapName + "/" + hex[i:i+1], Lo: lo + uint64(i)*step, Hi: lo + uint64(i+1)*step - 1}
	}
	out[0].Lo, out[15].Hi = 0, math.MaxUint64
	return out
}

// idBounds returns the lowest and highest ID with a record under prefix
// (0, 0 for an empty map): the first key is one read, the last a binary
// search of one-record reads (at most 64). IDs come from a sequence that
// hands out blocks, so the IDs in use are dense between the two, and the
// oldest ones are removed over time: splitting [lo, hi] evenly gives
// partitions of similar size where splitting the whole ID space would put
// everything in the first.
func idBounds(ctx context.Context, kv PageScanner, prefix string) (lo, hi uint64, err error) {
	end := []byte(prefix + meta.FormatID(math.MaxUint64) + "\x00")
	first := func(from uint64) (uint64, bool, error) {
		items, err := kv.Scan(ctx, []byte(prefix+meta.FormatID(from)), end, 1)
		if err != nil || len(items) == 0 {
			return 0, false, err
		}
		id, err := meta.ParseID(items[0].Key)
		return id, err == nil, err
	}
	lo, ok, err := first(0)
	if err != nil || !ok {
		return 0, 0, err
	}
	// The largest x such that some ID >= x exists is the highest ID.
	a, b := lo, uint64(math.MaxUint64)
	for a < b {
		mid := a + (b-a)/2 + 1
		if _, ok, err := first(mid); err != nil {
			return 0, 0, err
		} else if ok {
			a = mid
		} else {
			b = mid - 1
		}
	}
	return lo, a, nil
}

// keyRange returns the partition's key range in a map under prefix. Keys
// of the map that are not 16 hex digits are outside every partition. An
// owner partition's range is that of its buckets.
func (p Partition) keyRange(prefix string) (start, end []byte) {
	if m, _ := ParsePartition(p.Name); isOwnerMap(m) {
		start = []byte(prefix + p.From)
		if p.To == "" {
			return start, meta.PrefixEnd([]byte(prefix))
		}
		return start, []byte(prefix + p.To)
	}
	start = []byte(prefix + meta.FormatID(p.Lo))
	if p.Hi == math.MaxUint64 {
		return start, []byte(prefix + meta.FormatID(p.Hi) + "\x00")
	}
	return start, []byte(prefix + meta.FormatID(p.Hi+1))
}

// ParsePartition checks a partition name ("egroups/3", "extents/f",
// "objects/0", "versions/2", "uploads/1") and returns its map.
func ParsePartition(part string) (mapName string, err error) {
	m, d, ok := strings.Cut(part, "/")
	if !ok || !slices.Contains([]string{"egroups", "extents", "objects", "versions", "uploads"}, m) || len(d) != 1 || !strings.Contains("0123456789abcdef", d) {
		return "", fmt.Errorf("curator: bad partition %q: want MAP/H, MAP one of egroups, extents, objects, versions, uploads and H one hex digit", part)
	}
	return m, nil
}

// Check validates a partition received from a peer.
func (p Partition) Check() error {
	m, err := ParsePartition(p.Name)
	if err != nil {
		return err
	}
	if p.Rev < 0 {
		return fmt.Errorf("curator: partition %s: negative revision %d", p.Name, p.Rev)
	}
	if err := p.checkShuffle(); err != nil {
		return err
	}
	if isOwnerMap(m) {
		if p.To != "" && p.From >= p.To {
			return fmt.Errorf("curator: partition %s: bucket range [%q, %q) is empty", p.Name, p.From, p.To)
		}
		return nil
	}
	if p.From != "" || p.To != "" {
		return fmt.Errorf("curator: partition %s: an ID range takes no bucket bounds", p.Name)
	}
	if p.Lo > p.Hi {
		return fmt.Errorf("curator: partition %s: range [%d, %d] is empty", p.Name, p.Lo, p.Hi)
	}
	return nil
}

// MapPartition runs the map stage of one partition over kv, calling emit
// for each output record in key order, and returns how many metadata
// records it read. It is the whole of a worker's share of a scan.
func MapPartition(ctx context.Context, kv PageScanner, p Partition, emit func(MapRecord) error) (read int, err error) {
	return mapPartition(ctx, kv, p, false, emit)
}

// mapPartitionReused is MapPartition for an emit that copies what it
// keeps of a record before it returns (into a compact form, a frame it
// encodes, a chunk): the Egroup, Access and Extent a record points to
// are then one value each, decoded over for every record. A map stage
// that allocated one of each per record spent a fifth of its time in the
// garbage collector (write barriers and marking) for values dropped at
// once.
func mapPartitionReused(ctx context.Context, kv PageScanner, p Partition, emit func(MapRecord) error) (read int, err error) {
	return mapPartition(ctx, kv, p, true, emit)
}

func mapPartition(ctx context.Context, kv PageScanner, p Partition, reuse bool, emit func(MapRecord) error) (read int, err error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	if p.Shuffle != nil {
		return 0, fmt.Errorf("curator: partition %s is part of shuffle %s: map it with the node's shuffle store", p.Name, p.Shuffle.ID)
	}
	mapName, _ := ParsePartition(p.Name)
	if isOwnerMap(mapName) {
		return mapOwners(ctx, kv, mapName, p, emit)
	}
	// Records are decoded into blocks (slab, meta.RecordDecoder): a map
	// stage decodes millions, and one allocation per record and per
	// replica list was a third of its time.
	var dec meta.RecordDecoder
	if reuse {
		dec.ReuseReplicas()
	}
	if mapName == "extents" {
		var xs slab[meta.Extent]
		var one meta.Extent
		s, e := p.keyRange(meta.PrefixExtent)
		return visitRange(ctx, kv, s, e, func(it meta.Item) error {
			id, err := meta.ParseID(it.Key)
			if err != nil {
				return fmt.Errorf("curator: bad extent key %q", it.Key)
			}
			x := &one
			if reuse {
				one = meta.Extent{} // JSON decoding merges into what is there
			} else {
				x = xs.next()
			}
			if err := dec.Decode(it.Value, x); err != nil {
				return err
			}
			return emit(MapRecord{ID: id, Rev: it.ModRev, Extent: x})
		})
	}
	// The egroup and access maps are both in ID order: merge-join them,
	// reading the access records a page at a time just ahead of the
	// egroups. An access record without an egroup (the egroup was
	// removed) joins nothing, as in the reduce; one that is not an access
	// record of ours (a bad key or value) is skipped.
	var egs slab[meta.Egroup]
	var accs slab[meta.Access]
	var oneEg meta.Egroup
	var oneAcc meta.Access
	s, e := p.keyRange(meta.PrefixAccess)
	acc := &pager{kv: kv, start: s, end: e}
	defer acc.close()
	var next struct {
		id  uint64
		a   meta.Access
		set bool
	}
	accessOf := func(id uint64) (*meta.Access, error) {
		for {
			if next.set {
				switch {
				case next.id > id:
					return nil, nil
				case next.id == id:
					next.set = false
					a := &oneAcc
					if !reuse {
						a = accs.next()
					}
					*a = next.a
					return a, nil
				}
				next.set = false
			}
			it, ok, err := acc.next(ctx)
			if err != nil || !ok {
				return nil, err
			}
			aid, err := meta.ParseID(it.Key)
			if err != nil {
				continue
			}
			next.a = meta.Access{} // JSON decoding merges into what is there
			if dec.Decode(it.Value, &next.a) != nil {
				continue
			}
			next.id, next.set = aid, true
		}
	}
	s, e = p.keyRange(meta.PrefixEgroup)
	n, err := visitRange(ctx, kv, s, e, func(it meta.Item) error {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			return fmt.Errorf("curator: bad egroup key %q", it.Key)
		}
		eg := &oneEg
		if reuse {
			oneEg = meta.Egroup{}
		} else {
			eg = egs.next()
		}
		if err := dec.Decode(it.Value, eg); err != nil {
			return err
		}
		r := MapRecord{ID: id, Rev: it.ModRev, Egroup: eg}
		if r.Access, err = accessOf(id); err != nil {
			return err
		}
		return emit(r)
	})
	if err == nil {
		// Count the access records past the last egroup too: a
		// partition's read count is every record in its ranges.
		err = acc.skipRest(ctx)
	}
	return acc.read + n, err
}

// mapOwners is the map of an owner partition: each record that
// references extents or is history to collect becomes an OwnerRecord.
// Upload records (as opposed to their parts) reference nothing and are
// only counted.
func mapOwners(ctx context.Context, kv PageScanner, mapName string, p Partition, emit func(MapRecord) error) (int, error) {
	s, e := p.keyRange(ownerPrefix(mapName))
	seq := uint64(0)
	out := func(o OwnerRecord) error {
		seq++
		return emit(MapRecord{ID: seq, Owner: &o})
	}
	n := 0
	// sample emits every ownerCutEvery-th record's cut point, the first
	// record excepted (a cut there would not divide anything).
	sample := func(cut string) error {
		n++
		if n%ownerCutEvery != 0 || mapName == "uploads" {
			return nil
		}
		return out(OwnerRecord{Cut: cut})
	}
	ids := func(xs []meta.ExtentRef) []uint64 {
		if len(xs) == 0 {
			return nil
		}
		out := make([]uint64, len(xs))
		for i, x := range xs {
			out[i] = x.ID
		}
		return out
	}
	switch mapName {
	case "objects":
		return visitRange(ctx, kv, s, e, func(it meta.Item) error {
			var o meta.Object
			if err := meta.Decode(it.Value, &o); err != nil {
				return err
			}
			b, k, _ := meta.SplitObjectKey(it.Key)
			if err := sample(string(it.Key[len(meta.PrefixObject):])); err != nil {
				return err
			}
			r := OwnerRecord{Bucket: b, Extents: ids(o.Extents)}
			if o.DeleteMarker && o.VersionID == "" {
				r.History, r.Key = true, k // a tombstone
			}
			if len(r.Extents) == 0 && !r.History {
				return nil
			}
			return out(r)
		})
	case "versions":
		var lastHidden [2]string
		return visitRange(ctx, kv, s, e, func(it meta.Item) error {
			v, b, k, err := decodeVersion(it)
			if err != nil {
				return err
			}
			if err := sample(b + "\x00" + k); err != nil {
				return err
			}
			r := OwnerRecord{Bucket: b, Extents: ids(v.Extents)}
			if !v.S3 && (lastHidden != [2]string{b, k}) {
				lastHidden = [2]string{b, k}
				r.History, r.Key = true, k
			}
			if len(r.Extents) == 0 && !r.History {
				return nil
			}
			return out(r)
		})
	}
	return visitRange(ctx, kv, s, e, func(it meta.Item) error {
		var pt meta.Part
		if meta.Decode(it.Value, &pt) == nil && len(pt.Extents) > 0 {
			return out(OwnerRecord{Extents: ids(pt.Extents)})
		}
		return nil
	})
}

// decodeVersion decodes a version record and names its bucket and key.
func decodeVersion(it meta.Item) (v meta.Version, bucket, key string, err error) {
	if err := meta.Decode(it.Value, &v); err != nil {
		return v, "", "", err
	}
	bucket, key, _, ok := meta.SplitVersionKey(it.Key)
	if !ok {
		return v, "", "", fmt.Errorf("curator: bad version key %q", it.Key)
	}
	return v, bucket, key, nil
}

// mapFrame is one frame of the map output stream a worker sends: records,
// then one frame with End set (the count, or the error that stopped the
// map). A stream without its end frame was cut off and is not used.
type mapFrame struct {
	Recs []MapRecord
	// A compact stream of an egroup partition (WriteCompactMapStream)
	// sends its egroups as Egs instead, each naming its shape by its
	// index among the Shapes of the stream's frames so far; a frame
	// carries the shapes its egroups are the first to use.
	Shapes []mapShape
	Egs    []mapEgroup
	// An extent partition's compact stream sends its extents as Xs.
	Xs []mapExtent
	// A reduced extent partition (shuffle.go) also sends the joined
	// references as Refs, naming buckets by 1 + index among the Names
	// of the stream's frames so far (0: none).
	Refs  []mapRef
	Names []string
	End   bool
	Read  int
	N     int
	Err   string
	// An egroup partition's reduce (shuffle.go) sends its aggregates as
	// Aggs (buckets named as Refs name them) and the extents the master
	// acts on as Xs, in ID order.
	Aggs []mapAgg
	// Shuffled, in the end frame of a shuffled owner or extent partition,
	// is how many records the map sent to each reducer, as Mapper.
	Shuffled []ShuffleCount
	Mapper   model.NodeID
	// PushFailed, with Err, names the reducer a push to failed.
	PushFailed model.NodeID
}

// mapAgg is an egroupAgg on the wire.
type mapAgg struct {
	Egroup                           uint64
	LiveN, DeadN, LiveBytes, TailEnd int64
	FirstSeq, FirstBucket            uint32
	Buckets                          []uint32
	Listed                           bool
}

// mapRef is a joined reference a reduce sends (MapRecord.isRef).
type mapRef struct {
	ID     uint64
	Seq    uint32
	Bucket uint32
}

// mapShape is an egroup shape (egroupShape) as a compact stream sends it:
// the first record that has it, and whether that egroup has an access
// record. The master interns it as it would that record's.
type mapShape struct {
	Egroup   meta.Egroup
	Accessed bool
}

// mapExtent is an extent in the form the master keeps (extentRec): the
// fields a full scan's reduce reads, without the codec name and checksum
// a decoded record carries, and no pointer to allocate per record.
type mapExtent struct {
	ID                      uint64
	Rev                     int64
	Egroup                  uint64
	Off, Len, Stored, Ctime int64
	FP                      []byte
	Live                    bool // a reduce's extent: something references it
}

// mapEgroup is an egroup in the compact form the master keeps
// (egroupRec): the worker does the master's first reduce step, and what
// travels per egroup is nine integers, not a decoded record with its
// replica list and access record.
type mapEgroup struct {
	ID                                                 uint64
	Rev, Size, Mtime, Logical, FileBytes, Atime, Reads int64
	Shape                                              uint32
}

// mapFrameRecords is how many records one frame carries.
const mapFrameRecords = 512

// maxMapRecords bounds one partition's output a master accepts (a
// sixteenth of a map: 64M egroups per partition is far past what one
// scan holds in memory anyway).
const maxMapRecords = 1 << 26

// mapHeartbeat is how often a worker sends an empty frame while it reads
// without output (a partition's access records come before its first
// egroup), so the master can tell a slow partition from a dead peer.
const mapHeartbeat = time.Second

// WriteMapStream runs the map stage of part over kv and writes its output
// to w as a stream a master decodes with ReadMapStream. A map error is
// sent in the end frame (and returned) so the master reports the worker's
// reason, not a truncated stream. Every frame is one Write (flush it, on
// HTTP, so heartbeats are not held in a buffer).
func WriteMapStream(ctx context.Context, w io.Writer, kv PageScanner, part Partition) error {
	return writeMapStream(ctx, w, kv, part, false, ShuffleEnv{})
}

// WriteCompactMapStream is WriteMapStream sending an egroup partition's
// egroups in the compact form the master keeps (mapEgroup, mapShape);
// other partitions are sent as WriteMapStream sends them. A master of
// this version reads both forms with ReadMapStream; one that predates
// the compact form must not ask for it.
func WriteCompactMapStream(ctx context.Context, w io.Writer, kv PageScanner, part Partition) error {
	return writeMapStream(ctx, w, kv, part, true, ShuffleEnv{})
}

// WriteShuffleMapStream is WriteCompactMapStream for a node that takes
// part in shuffles (shuffle.go): a partition with a shuffle spec is
// mapped with env — an owner partition pushes its references to their
// reducers and sends the counts in its end frame, an extent partition is
// reduced with the references env's store holds for it.
func WriteShuffleMapStream(ctx context.Context, w io.Writer, kv PageScanner, part Partition, env ShuffleEnv) error {
	return writeMapStream(ctx, w, kv, part, true, env)
}

func writeMapStream(ctx context.Context, w io.Writer, kv PageScanner, part Partition, compact bool, env ShuffleEnv) error {
	mapName, err := ParsePartition(part.Name)
	if err != nil {
		return err
	}
	if mapName != "egroups" && mapName != "extents" {
		compact = false
	}
	mapFn := MapPartition
	if compact {
		// Every record is copied into its compact form as it is emitted;
		// an owner record (not compact) carries no reused value.
		mapFn = mapPartitionReused
	}
	if part.Shuffle != nil {
		// A reduce's output exists in compact form only.
		compact = compact || !isOwnerMap(mapName)
		mapFn = func(ctx context.Context, kv PageScanner, p Partition, emit func(MapRecord) error) (int, error) {
			return mapShuffled(ctx, kv, p, env, emit)
		}
	}
	if part.Rev > 0 {
		// The master's snapshot: read the same revision here.
		ss, ok := kv.(meta.Snapshotter)
		if !ok {
			return fmt.Errorf("curator: partition %s is at revision %d, and this store cannot read a revision", part.Name, part.Rev)
		}
		snap, err := ss.SnapshotAt(ctx, part.Rev)
		if err != nil {
			return fmt.Errorf("curator: partition %s: %w", part.Name, err)
		}
		defer snap.Close()
		kv = snap
	}
	var mu sync.Mutex // the encoder is shared with the heartbeat
	enc := gob.NewEncoder(w)
	last := time.Now()
	send := func(f mapFrame) error {
		mu.Lock()
		defer mu.Unlock()
		last = time.Now()
		return enc.Encode(f)
	}
	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Add(1)
	go func() {
		defer beats.Done()
		t := time.NewTicker(mapHeartbeat / 2)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				mu.Lock()
				quiet := time.Since(last) >= mapHeartbeat
				mu.Unlock()
				if quiet && send(mapFrame{}) != nil {
					return
				}
			}
		}
	}()
	var cf mapFrame // the frame being filled
	in := newShapeInterner()
	shapeIDs := map[*egroupShape]uint32{}
	bucketIDs := map[string]uint32{}
	// bucketID names a bucket by 1 + its index among the stream's names,
	// sending a name with the frame that first uses it ("": 0).
	bucketID := func(name string) uint32 {
		if name == "" {
			return 0
		}
		b, ok := bucketIDs[name]
		if !ok {
			b = uint32(len(bucketIDs) + 1)
			bucketIDs[name] = b
			cf.Names = append(cf.Names, name)
		}
		return b
	}
	var done *shuffled
	sent := 0
	count := func() int { return len(cf.Recs) + len(cf.Egs) + len(cf.Xs) + len(cf.Refs) + len(cf.Aggs) }
	flush := func() error {
		if count() == 0 {
			return nil
		}
		sent += count()
		err := send(cf)
		// Encode has written the frame: its slices can take the next.
		// A frame carries only the shapes and names first used in it.
		cf = mapFrame{Recs: cf.Recs[:0], Egs: cf.Egs[:0], Xs: cf.Xs[:0], Refs: cf.Refs[:0], Aggs: cf.Aggs[:0]}
		return err
	}
	read, err := mapFn(ctx, kv, part, func(r MapRecord) error {
		switch {
		case r.shuffled != nil:
			done = r.shuffled
			return nil
		case r.isRef:
			cf.Refs = append(cf.Refs, mapRef{ID: r.ID, Seq: r.refSeq, Bucket: bucketID(r.refBucket)})
		case r.agg != nil:
			g := r.agg
			a := mapAgg{Egroup: g.egroup, LiveN: g.liveN, DeadN: g.deadN, LiveBytes: g.liveBytes, TailEnd: g.tailEnd,
				FirstSeq: g.firstSeq, Listed: g.listed}
			if g.firstBucket != 0 {
				a.FirstBucket = bucketID(g.names[g.firstBucket-1])
			}
			for _, b := range g.buckets {
				if b == 0 {
					a.Buckets = append(a.Buckets, 0)
				} else {
					a.Buckets = append(a.Buckets, bucketID(g.names[b-1]))
				}
			}
			cf.Aggs = append(cf.Aggs, a)
		case r.isExtent:
			x := r.compactExtent
			cf.Xs = append(cf.Xs, mapExtent{ID: x.id, Rev: x.modRev, Egroup: x.egroup, Off: x.off, Len: x.len,
				Stored: x.stored, Ctime: x.ctime, FP: r.compactFP, Live: x.live})
		case compact && r.Extent != nil:
			x := r.Extent
			cf.Xs = append(cf.Xs, mapExtent{ID: r.ID, Rev: r.Rev, Egroup: x.Egroup, Off: x.Off, Len: x.Len,
				Stored: x.StoredLen(), Ctime: x.Ctime, FP: x.FP})
		case compact:
			x := in.rec(r)
			id, ok := shapeIDs[x.shape]
			if !ok {
				id = uint32(len(shapeIDs))
				shapeIDs[x.shape] = id
				eg := *r.Egroup
				eg.Replicas = slices.Clone(eg.Replicas) // the decoder reuses the list's memory
				cf.Shapes = append(cf.Shapes, mapShape{Egroup: eg, Accessed: r.Access != nil})
			}
			cf.Egs = append(cf.Egs, mapEgroup{ID: x.id, Rev: x.rev, Size: x.size, Mtime: x.mtime, Logical: x.logical,
				FileBytes: x.fileBytes, Atime: x.atime, Reads: x.reads, Shape: id})
		default:
			cf.Recs = append(cf.Recs, r)
		}
		if count() < mapFrameRecords {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	close(stop)
	beats.Wait()
	end := mapFrame{End: true, Read: read, N: sent}
	if done != nil {
		end.Shuffled, end.Mapper = done.counts, done.mapper
	}
	if err != nil {
		end.Err = err.Error()
		var pe *ShufflePushError
		if errors.As(err, &pe) {
			end.PushFailed = pe.Node
		}
	}
	if werr := send(end); werr != nil && err == nil {
		err = werr
	}
	return err
}

// ReadMapStream decodes a worker's map output for part. It fails on a
// stream cut short, a worker's error, a record count that disagrees with
// the end frame, records out of key order or of the wrong kind for the
// partition: a partition is used whole or not at all.
func ReadMapStream(r io.Reader, part Partition) (MapOutput, error) {
	out := MapOutput{Part: part.Name}
	read, err := ReadMapStreamTo(r, part, func(rec MapRecord) { out.Records = append(out.Records, rec) })
	if err != nil {
		return MapOutput{}, err
	}
	out.Read = read
	return out, nil
}

// ReadMapStreamTo is ReadMapStream handing each record to emit as it is
// decoded and checked, so the caller need not hold a partition's decoded
// output, and returning the worker's read count. On an error the records
// already emitted are not the partition's output: the caller discards
// them.
func ReadMapStreamTo(r io.Reader, part Partition, emit func(MapRecord)) (read int, err error) {
	if err := part.Check(); err != nil {
		return 0, err
	}
	mapName, _ := ParsePartition(part.Name)
	dec := gob.NewDecoder(r)
	n := 0
	var last, lastRef uint64
	var in *shapeInterner // a compact stream's shapes, interned here
	var shapes []*egroupShape
	var names []string // a reduce's bucket names
	// A shuffled owner or extent partition ends with what it sent; a
	// shuffled egroup partition (a reduce) sends aggregates and the
	// extents the master acts on.
	shuffledOwners := part.Shuffle != nil && isOwnerMap(mapName)
	shuffledSends := part.Shuffle != nil && mapName != "egroups"
	reduced := part.Shuffle != nil && mapName == "egroups"
	var lastAgg, lastShip uint64
	aggs, ships := 0, 0
	for {
		var f mapFrame
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return 0, fmt.Errorf("curator: map output of %s cut short after %d records", part.Name, n)
			}
			return 0, fmt.Errorf("curator: map output of %s: %w", part.Name, err)
		}
		if f.End {
			switch {
			case f.Err != "" && f.PushFailed != "":
				return 0, &ShufflePushError{Node: f.PushFailed, Err: fmt.Errorf("curator: map of %s failed on the worker: %s", part.Name, f.Err)}
			case f.Err != "":
				return 0, fmt.Errorf("curator: map of %s failed on the worker: %s", part.Name, f.Err)
			case f.N != n || len(f.Recs) != 0 || len(f.Egs) != 0 || len(f.Shapes) != 0 || len(f.Xs) != 0:
				return 0, fmt.Errorf("curator: map output of %s: %d records, the worker sent %d", part.Name, n, f.N)
			case f.Read < 0:
				return 0, fmt.Errorf("curator: map output of %s: negative read count %d", part.Name, f.Read)
			}
			switch {
			case shuffledSends:
				sh, err := checkShuffled(part, f)
				if err != nil {
					return 0, err
				}
				emit(MapRecord{shuffled: sh})
			case reduced:
				if f.Mapper == "" || len(f.Shuffled) > 0 {
					return 0, fmt.Errorf("curator: map output of %s: not reduced (a node of a version without shuffles?)", part.Name)
				}
				emit(MapRecord{shuffled: &shuffled{mapper: f.Mapper}})
			case len(f.Shuffled) > 0 || f.Mapper != "":
				return 0, fmt.Errorf("curator: map output of %s: shuffle counts for a partition not shuffled", part.Name)
			}
			return f.Read, nil
		}
		if n+len(f.Recs)+len(f.Egs)+len(f.Xs)+len(f.Refs)+len(f.Aggs) > maxMapRecords || len(shapes)+len(f.Shapes) > maxMapRecords {
			return 0, fmt.Errorf("curator: map output of %s exceeds %d records", part.Name, maxMapRecords)
		}
		if (len(f.Egs) > 0 || len(f.Shapes) > 0) && (mapName != "egroups" || len(f.Recs) > 0) {
			return 0, fmt.Errorf("curator: map output of %s: compact egroups in a stream of other records", part.Name)
		}
		if len(f.Xs) > 0 && (mapName != "extents" && !reduced || len(f.Recs) > 0) {
			return 0, fmt.Errorf("curator: map output of %s: compact extents in a stream of other records", part.Name)
		}
		if len(f.Refs) > 0 && (mapName != "extents" || part.Shuffle == nil || len(f.Recs) > 0) {
			return 0, fmt.Errorf("curator: map output of %s: dangling references from a partition not reduced", part.Name)
		}
		if (len(f.Aggs) > 0 || len(f.Names) > 0) && !reduced {
			return 0, fmt.Errorf("curator: map output of %s: aggregates from a partition not reduced", part.Name)
		}
		if len(f.Refs)+len(f.Aggs) > maxMapRecords || len(names)+len(f.Names) > maxMapRecords {
			return 0, fmt.Errorf("curator: map output of %s exceeds %d records", part.Name, maxMapRecords)
		}
		names = append(names, f.Names...)
		// next takes a compact record's ID: in the partition, after the
		// last one.
		next := func(kind string, id uint64) error {
			switch {
			case id < part.Lo || id > part.Hi:
				return fmt.Errorf("curator: map output of %s: %s %016x is not in [%016x, %016x]", part.Name, kind, id, part.Lo, part.Hi)
			case n > 0 && last >= id:
				return fmt.Errorf("curator: map output of %s: record %016x after %016x (out of order)", part.Name, id, last)
			}
			last = id
			n++
			return nil
		}
		for i := range f.Aggs {
			a := &f.Aggs[i]
			switch {
			case a.Egroup < part.Lo || a.Egroup > part.Hi:
				return 0, fmt.Errorf("curator: map output of %s: aggregate of egroup %016x is not in [%016x, %016x]", part.Name, a.Egroup, part.Lo, part.Hi)
			case aggs > 0 && a.Egroup <= lastAgg:
				return 0, fmt.Errorf("curator: map output of %s: aggregate of %016x after %016x (out of order)", part.Name, a.Egroup, lastAgg)
			case a.LiveN < 0 || a.DeadN < 0 || a.LiveBytes < 0 || a.TailEnd < 0 || a.LiveN+a.DeadN == 0:
				return 0, fmt.Errorf("curator: map output of %s: aggregate of %016x counts %d live and %d dead extents, %d live bytes, tail %d", part.Name, a.Egroup, a.LiveN, a.DeadN, a.LiveBytes, a.TailEnd)
			case int(a.FirstBucket) > len(names) || slices.ContainsFunc(a.Buckets, func(b uint32) bool { return int(b) > len(names) }):
				return 0, fmt.Errorf("curator: map output of %s: aggregate of %016x names a bucket not sent", part.Name, a.Egroup)
			}
			lastAgg = a.Egroup
			aggs++
			n++
			emit(MapRecord{ID: a.Egroup, agg: &egroupAgg{egroup: a.Egroup, liveN: a.LiveN, deadN: a.DeadN, liveBytes: a.LiveBytes,
				tailEnd: a.TailEnd, firstSeq: a.FirstSeq, firstBucket: a.FirstBucket, buckets: a.Buckets, listed: a.Listed, names: names}})
		}
		for _, x := range f.Xs {
			if reduced {
				switch {
				case x.Egroup < part.Lo || x.Egroup > part.Hi:
					return 0, fmt.Errorf("curator: map output of %s: extent %016x of egroup %016x, not of the partition", part.Name, x.ID, x.Egroup)
				case ships > 0 && x.ID <= lastShip:
					return 0, fmt.Errorf("curator: map output of %s: extent %016x after %016x (out of order)", part.Name, x.ID, lastShip)
				}
				lastShip = x.ID
				ships++
				n++
				emit(MapRecord{ID: x.ID, Rev: x.Rev, isExtent: true, compactFP: x.FP, compactExtent: extentRec{id: x.ID, modRev: x.Rev,
					egroup: x.Egroup, off: x.Off, len: x.Len, stored: x.Stored, ctime: x.Ctime, live: x.Live}})
				continue
			}
			if err := next("extent", x.ID); err != nil {
				return 0, err
			}
			emit(MapRecord{ID: x.ID, Rev: x.Rev, isExtent: true, compactFP: x.FP, compactExtent: extentRec{id: x.ID, modRev: x.Rev,
				egroup: x.Egroup, off: x.Off, len: x.Len, stored: x.Stored, ctime: x.Ctime}})
		}
		for _, x := range f.Refs {
			switch {
			case x.ID < part.Lo || x.ID > part.Hi:
				return 0, fmt.Errorf("curator: map output of %s: reference to %016x is not in [%016x, %016x]", part.Name, x.ID, part.Lo, part.Hi)
			case x.ID < lastRef:
				return 0, fmt.Errorf("curator: map output of %s: reference to %016x after %016x (out of order)", part.Name, x.ID, lastRef)
			case int(x.Bucket) > len(names):
				return 0, fmt.Errorf("curator: map output of %s: reference names bucket %d of %d sent", part.Name, x.Bucket, len(names))
			}
			lastRef = x.ID
			n++
			r := MapRecord{ID: x.ID, isRef: true, refSeq: x.Seq}
			if x.Bucket > 0 {
				r.refBucket = names[x.Bucket-1]
			}
			emit(r)
		}
		for i := range f.Shapes {
			if in == nil {
				in = newShapeInterner()
			}
			s := &f.Shapes[i]
			shapes = append(shapes, in.shape(&s.Egroup, s.Accessed))
		}
		for _, c := range f.Egs {
			if int(c.Shape) >= len(shapes) {
				return 0, fmt.Errorf("curator: map output of %s: egroup %016x has shape %d of %d sent", part.Name, c.ID, c.Shape, len(shapes))
			}
			if err := next("egroup", c.ID); err != nil {
				return 0, err
			}
			emit(MapRecord{ID: c.ID, Rev: c.Rev, compact: egroupRec{id: c.ID, rev: c.Rev, size: c.Size, mtime: c.Mtime,
				logical: c.Logical, fileBytes: c.FileBytes, atime: c.Atime, reads: c.Reads, shape: shapes[c.Shape]}})
		}
		for _, rec := range f.Recs {
			if err := checkMapRecord(rec, mapName, part); err != nil {
				return 0, fmt.Errorf("curator: map output of %s: %w", part.Name, err)
			}
			if shuffledOwners && len(rec.Owner.Extents) > 0 {
				return 0, fmt.Errorf("curator: map output of %s: record %d carries references the worker should have shuffled", part.Name, rec.ID)
			}
			if n > 0 && last >= rec.ID {
				return 0, fmt.Errorf("curator: map output of %s: record %016x after %016x (out of order)", part.Name, rec.ID, last)
			}
			last = rec.ID
			n++
			emit(rec)
		}
	}
}

// checkShuffled verifies the shuffle counts in a shuffled owner
// partition's end frame: its mapper, and a count for reducers it was
// routed to, once each.
func checkShuffled(part Partition, f mapFrame) (*shuffled, error) {
	if f.Mapper == "" {
		return nil, fmt.Errorf("curator: map output of %s: the worker did not shuffle it (a node of a version without shuffles?)", part.Name)
	}
	sh := &shuffled{mapper: f.Mapper}
	seen := map[string]bool{}
	for _, c := range f.Shuffled {
		ok := slices.ContainsFunc(part.Shuffle.Routes, func(r ShuffleRoute) bool { return r.Part == c.Dst })
		if !ok || c.Count <= 0 || seen[c.Dst] {
			return nil, fmt.Errorf("curator: map output of %s: %d records shuffled to %q (not a route, none, or twice)", part.Name, c.Count, c.Dst)
		}
		seen[c.Dst] = true
		sh.counts = append(sh.counts, c)
	}
	return sh, nil
}

// checkMapRecord verifies a decoded record belongs to the partition.
func checkMapRecord(r MapRecord, mapName string, p Partition) error {
	if isOwnerMap(mapName) {
		o := r.Owner
		switch {
		case o == nil || r.Egroup != nil || r.Extent != nil || r.Access != nil:
			return fmt.Errorf("record %d is not an owner record", r.ID)
		case o.Cut != "":
			if o.Bucket != "" || len(o.Extents) > 0 || o.History || mapName == "uploads" {
				return fmt.Errorf("record %d: a cut point with more in it", r.ID)
			}
			if o.Cut < p.From || p.To != "" && o.Cut >= p.To {
				return fmt.Errorf("record %d: cut point %q is not in partition %s [%q, %q)", r.ID, o.Cut, p.Name, p.From, p.To)
			}
		case mapName == "uploads" && (o.Bucket != "" || o.History):
			return fmt.Errorf("record %d: an upload part names a bucket or history", r.ID)
		case mapName != "uploads" && !p.holdsBucket(o.Bucket):
			return fmt.Errorf("record %d: bucket %q is not in partition %s [%q, %q)", r.ID, o.Bucket, p.Name, p.From, p.To)
		case len(o.Extents) == 0 && !o.History:
			return fmt.Errorf("record %d references nothing", r.ID)
		}
		return nil
	}
	if r.Owner != nil {
		return fmt.Errorf("record %016x is an owner record", r.ID)
	}
	if r.ID < p.Lo || r.ID > p.Hi {
		return fmt.Errorf("record %016x is not in partition %s [%016x, %016x]", r.ID, p.Name, p.Lo, p.Hi)
	}
	if mapName == "egroups" {
		if r.Egroup == nil || r.Extent != nil {
			return fmt.Errorf("record %016x is not an egroup", r.ID)
		}
		return nil
	}
	if r.Extent == nil || r.Egroup != nil || r.Access != nil {
		return fmt.Errorf("record %016x is not an extent", r.ID)
	}
	return nil
}

// SpreadPartitions is the default assignment of a cluster's scan
// partitions when no balancer policy is set: biggest partition first (by
// the records it held at the last scan; an unseen partition counts one)
// to the up node with the fewest records so far, ties to the lower node
// ID. It is pure: the same snapshot and loads give the same assignment.
// A single node keeps everything (nil).
func SpreadPartitions(s *model.Snapshot, parts []PartitionLoad) map[string]model.NodeID {
	var up []model.NodeID
	for _, n := range s.Nodes {
		if n.Up {
			up = append(up, n.ID)
		}
	}
	if len(up) < 2 {
		return nil
	}
	slices.Sort(up)
	order := slices.Clone(parts)
	weight := func(p PartitionLoad) int { return max(p.Records, 1) }
	slices.SortStableFunc(order, func(a, b PartitionLoad) int {
		if c := cmp.Compare(weight(b), weight(a)); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	load := make([]int, len(up))
	out := make(map[string]model.NodeID, len(order))
	for _, p := range order {
		best := 0
		for i := range up {
			if load[i] < load[best] {
				best = i
			}
		}
		out[p.Name] = up[best]
		load[best] += weight(p)
	}
	return out
}

// slab hands out pointers to fresh zero values carved from shared blocks:
// one allocation per slabBlock values. A value handed out is never
// handed out again; a block lives while any of its values is referenced.
type slab[T any] struct{ blk []T }

const slabBlock = 256

func (s *slab[T]) next() *T {
	if len(s.blk) == cap(s.blk) {
		s.blk = make([]T, 0, slabBlock)
	}
	s.blk = s.blk[:len(s.blk)+1]
	return &s.blk[len(s.blk)-1]
}
