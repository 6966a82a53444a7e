package curator

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

// The map stage of a scan, runnable on any node (Curator §3.1). A
// partition is one sixteenth of a map by the first hex digit of the ID:
// "egroups/3" reads the egroup records g/3… and the access records a/3…
// and joins them map-side (both maps are keyed by egroup ID, so the
// partitions line up and the join needs no shuffle); "extents/a" reads
// the extent records x/a…. The node that runs a partition decodes the
// records and ships the decoded output — the master never sees raw
// records of a partition another node mapped — and the master's reduce
// joins the partitions' outputs. The master runs the same function for
// the partitions it keeps, so a partition's output does not depend on
// where it ran.

// MapRecord is one record of a partition's map output: an egroup with its
// access record (nil: never read) or an extent, with the metadata revision
// it was read at.
type MapRecord struct {
	ID     uint64
	Rev    int64
	Egroup *meta.Egroup
	Access *meta.Access
	Extent *meta.Extent
}

// MapOutput is a partition's map output: its records and how many
// metadata records the map read to produce them.
type MapOutput struct {
	Part    string
	Records []MapRecord
	Read    int
}

// PageScanner is the part of meta.KV the map stage reads through.
type PageScanner = pageScanner

// ParsePartition checks a partition name ("egroups/3", "extents/f") and
// returns its map and hex digit.
func ParsePartition(part string) (mapName string, digit byte, err error) {
	m, d, ok := strings.Cut(part, "/")
	if !ok || (m != "egroups" && m != "extents") || len(d) != 1 || !strings.Contains("0123456789abcdef", d) {
		return "", 0, fmt.Errorf("curator: bad partition %q: want egroups/H or extents/H with H one hex digit", part)
	}
	return m, d[0], nil
}

// MapPartition runs the map stage of one partition over kv, calling emit
// for each output record in key order, and returns how many metadata
// records it read. It is the whole of a worker's share of a scan.
func MapPartition(ctx context.Context, kv PageScanner, part string, emit func(MapRecord) error) (read int, err error) {
	mapName, digit, err := ParsePartition(part)
	if err != nil {
		return 0, err
	}
	rangeOf := func(prefix string) ([]byte, []byte) {
		s := []byte(prefix + string(digit))
		return s, meta.PrefixEnd(s)
	}
	if mapName == "extents" {
		s, e := rangeOf(meta.PrefixExtent)
		return scanRange(ctx, kv, s, e, func(it meta.Item) error {
			id, err := meta.ParseID(it.Key)
			if err != nil {
				return fmt.Errorf("curator: bad extent key %q", it.Key)
			}
			var x meta.Extent
			if err := meta.Decode(it.Value, &x); err != nil {
				return err
			}
			return emit(MapRecord{ID: id, Rev: it.ModRev, Extent: &x})
		})
	}
	// Access records first (a sixteenth of a map fits in memory), then
	// the egroups stream past them. An access record without an egroup
	// (the egroup was removed) joins nothing, as in the reduce.
	access := map[uint64]meta.Access{}
	s, e := rangeOf(meta.PrefixAccess)
	n, err := scanRange(ctx, kv, s, e, func(it meta.Item) error {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			return nil // not an access record of ours; the reduce skipped these too
		}
		var a meta.Access
		if meta.Decode(it.Value, &a) == nil {
			access[id] = a
		}
		return nil
	})
	read += n
	if err != nil {
		return read, err
	}
	s, e = rangeOf(meta.PrefixEgroup)
	n, err = scanRange(ctx, kv, s, e, func(it meta.Item) error {
		id, err := meta.ParseID(it.Key)
		if err != nil {
			return fmt.Errorf("curator: bad egroup key %q", it.Key)
		}
		var eg meta.Egroup
		if err := meta.Decode(it.Value, &eg); err != nil {
			return err
		}
		r := MapRecord{ID: id, Rev: it.ModRev, Egroup: &eg}
		if a, ok := access[id]; ok {
			r.Access = &a
		}
		return emit(r)
	})
	return read + n, err
}

// mapFrame is one frame of the map output stream a worker sends: records,
// then one frame with End set (the count, or the error that stopped the
// map). A stream without its end frame was cut off and is not used.
type mapFrame struct {
	Recs []MapRecord
	End  bool
	Read int
	N    int
	Err  string
}

// mapFrameRecords is how many records one frame carries.
const mapFrameRecords = 512

// maxMapRecords bounds one partition's output a master accepts (a
// sixteenth of a map: 64M egroups per partition is far past what one
// scan holds in memory anyway).
const maxMapRecords = 1 << 26

// WriteMapStream runs the map stage of part over kv and writes its output
// to w as a stream a master decodes with ReadMapStream. A map error is
// sent in the end frame (and returned) so the master reports the worker's
// reason, not a truncated stream.
func WriteMapStream(ctx context.Context, w io.Writer, kv PageScanner, part string) error {
	enc := gob.NewEncoder(w)
	buf := make([]MapRecord, 0, mapFrameRecords)
	sent := 0
	read, err := MapPartition(ctx, kv, part, func(r MapRecord) error {
		buf = append(buf, r)
		if len(buf) < mapFrameRecords {
			return nil
		}
		sent += len(buf)
		err := enc.Encode(mapFrame{Recs: buf})
		buf = buf[:0]
		return err
	})
	end := mapFrame{End: true, Read: read}
	if err == nil && len(buf) > 0 {
		sent += len(buf)
		err = enc.Encode(mapFrame{Recs: buf})
	}
	end.N = sent
	if err != nil {
		end.Err = err.Error()
	}
	if werr := enc.Encode(end); werr != nil && err == nil {
		err = werr
	}
	return err
}

// ReadMapStream decodes a worker's map output for part. It fails on a
// stream cut short, a worker's error, a record count that disagrees with
// the end frame, records out of key order or of the wrong kind for the
// partition: a partition is used whole or not at all.
func ReadMapStream(r io.Reader, part string) (MapOutput, error) {
	mapName, digit, err := ParsePartition(part)
	if err != nil {
		return MapOutput{}, err
	}
	out := MapOutput{Part: part}
	dec := gob.NewDecoder(r)
	for {
		var f mapFrame
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return MapOutput{}, fmt.Errorf("curator: map output of %s cut short after %d records", part, len(out.Records))
			}
			return MapOutput{}, fmt.Errorf("curator: map output of %s: %w", part, err)
		}
		if f.End {
			switch {
			case f.Err != "":
				return MapOutput{}, fmt.Errorf("curator: map of %s failed on the worker: %s", part, f.Err)
			case f.N != len(out.Records) || len(f.Recs) != 0:
				return MapOutput{}, fmt.Errorf("curator: map output of %s: %d records, the worker sent %d", part, len(out.Records), f.N)
			case f.Read < 0:
				return MapOutput{}, fmt.Errorf("curator: map output of %s: negative read count %d", part, f.Read)
			}
			out.Read = f.Read
			return out, nil
		}
		if len(out.Records)+len(f.Recs) > maxMapRecords {
			return MapOutput{}, fmt.Errorf("curator: map output of %s exceeds %d records", part, maxMapRecords)
		}
		for _, rec := range f.Recs {
			if err := checkMapRecord(rec, mapName, digit); err != nil {
				return MapOutput{}, fmt.Errorf("curator: map output of %s: %w", part, err)
			}
			if n := len(out.Records); n > 0 && out.Records[n-1].ID >= rec.ID {
				return MapOutput{}, fmt.Errorf("curator: map output of %s: record %016x after %016x (out of order)", part, rec.ID, out.Records[n-1].ID)
			}
			out.Records = append(out.Records, rec)
		}
	}
}

// checkMapRecord verifies a decoded record belongs to the partition.
func checkMapRecord(r MapRecord, mapName string, digit byte) error {
	if meta.FormatID(r.ID)[0] != digit {
		return fmt.Errorf("record %016x is not in partition %c", r.ID, digit)
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
