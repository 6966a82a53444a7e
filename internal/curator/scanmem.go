package curator

import (
	"encoding/binary"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// What the master holds per egroup between the map and the reduce of a
// scan. A scan used to keep each decoded egroup record (its replica slice,
// six short strings, a vector map) with its access record and revision in
// maps keyed by ID until the reduce built the decision views: about
// 1.3 KB per egroup, 3 KB at peak (docs/perf.md). Most of a record repeats
// across millions of egroups: the replica set (one of the few device
// combinations a cluster has), the vector, the writer, the codec. The
// master keeps the rest — IDs, sizes, times, read counts — in a fixed
// 72-byte egroupRec per egroup and interns the repeating part into a
// shared egroupShape, then builds the decision views once, in ID order,
// from the partitions' outputs (which are in ID order and tile the ID
// space, so no map or sort is needed).

// egroupShape is the part of an egroup's decision view that many egroups
// share. Its slices and maps are shared by every view built from it and
// must not be modified (no decision does: they build new slices).
type egroupShape struct {
	open, incompressible bool
	accessed             bool // the egroup has an access record
	writer               model.NodeID
	codec                string
	vector               model.Vector
	replicas             []decide.Replica // len == cap: an append copies
	ec                   decide.ECShape
}

// egroupRec is one egroup as the master holds it until the reduce.
type egroupRec struct {
	id        uint64
	rev       int64
	size      int64
	mtime     int64
	logical   int64
	fileBytes int64
	atime     int64 // access record (shape.accessed)
	reads     int64
	shape     *egroupShape
}

// egroupRecs is a partition's egroupRecs in fixed chunks: appending never
// copies what is there (a growing slice would reallocate and copy a
// partition of records over and over).
type egroupRecs struct {
	chunks [][]egroupRec
	n      int
}

const egroupRecChunk = 4096

func (rs *egroupRecs) add(x egroupRec) {
	if k := len(rs.chunks); k == 0 || len(rs.chunks[k-1]) == egroupRecChunk {
		rs.chunks = append(rs.chunks, make([]egroupRec, 0, egroupRecChunk))
	}
	k := len(rs.chunks) - 1
	rs.chunks[k] = append(rs.chunks[k], x)
	rs.n++
}

// shapeInterner interns egroup shapes. It is not safe for concurrent use:
// each partition of a scan has its own.
type shapeInterner struct {
	shapes map[string]*egroupShape
	key    []byte
	tiers  []model.Tier
	// last is the shape returned last: consecutive egroups mostly share
	// one (written together, by one writer, to one replica set), and
	// comparing with it is cheaper than spelling out the key.
	last *egroupShape
}

func newShapeInterner() *shapeInterner {
	return &shapeInterner{shapes: map[string]*egroupShape{}}
}

// rec is the compact form of a map record of the egroup map.
func (in *shapeInterner) rec(r MapRecord) egroupRec {
	eg := r.Egroup
	x := egroupRec{id: r.ID, rev: r.Rev, size: eg.Size, mtime: eg.Mtime, logical: eg.Logical, fileBytes: object.FileSize(*eg)}
	if r.Access != nil {
		x.atime, x.reads = r.Access.Atime, r.Access.WinReads
	}
	x.shape = in.shape(eg, r.Access != nil)
	return x
}

// shape returns the interned shape of eg. The key spells out every field
// of the shape, the vector's counts (zeros included) and whether its map
// is nil, so two egroups share a shape only if their views are equal.
func (in *shapeInterner) shape(eg *meta.Egroup, accessed bool) *egroupShape {
	if s := in.last; s != nil && s.is(eg, accessed) {
		return s
	}
	s := in.intern(eg, accessed)
	in.last = s
	return s
}

// is reports whether eg (accessed or not) has shape s: what the key
// spells out, compared field by field.
func (s *egroupShape) is(eg *meta.Egroup, accessed bool) bool {
	if s.open != (eg.State == meta.EgroupOpen) || s.incompressible != eg.Incompressible || s.accessed != accessed ||
		s.writer != eg.Writer || s.codec != eg.Codec || len(s.replicas) != len(eg.Replicas) {
		return false
	}
	var ec decide.ECShape
	if eg.EC != nil {
		ec = decide.ECShape{K: eg.EC.K, M: eg.EC.M}
	}
	if s.ec != ec || (s.vector.Counts == nil) != (eg.Vector.Counts == nil) || !maps.Equal(s.vector.Counts, eg.Vector.Counts) {
		return false
	}
	for i, r := range eg.Replicas {
		if x := s.replicas[i]; x.Device != r.Device || x.Node != r.Node || x.Tier != r.Tier || x.Bad != r.Bad {
			return false
		}
	}
	return true
}

// intern looks eg's shape up by its key, adding it if new.
func (in *shapeInterner) intern(eg *meta.Egroup, accessed bool) *egroupShape {
	k := in.key[:0]
	var flags byte
	if eg.State == meta.EgroupOpen {
		flags |= 1
	}
	if eg.Incompressible {
		flags |= 2
	}
	if accessed {
		flags |= 4
	}
	if eg.Vector.Counts == nil {
		flags |= 8
	}
	k = append(k, flags)
	k = appendStr(k, string(eg.Writer))
	k = appendStr(k, eg.Codec)
	var ec decide.ECShape
	if eg.EC != nil {
		ec = decide.ECShape{K: eg.EC.K, M: eg.EC.M}
	}
	k = binary.AppendVarint(k, int64(ec.K))
	k = binary.AppendVarint(k, int64(ec.M))
	in.tiers = in.tiers[:0]
	for t := range eg.Vector.Counts {
		in.tiers = append(in.tiers, t)
	}
	slices.Sort(in.tiers)
	k = binary.AppendUvarint(k, uint64(len(in.tiers)))
	for _, t := range in.tiers {
		k = appendStr(k, string(t))
		k = binary.AppendVarint(k, int64(eg.Vector.Counts[t]))
	}
	k = binary.AppendUvarint(k, uint64(len(eg.Replicas)))
	for _, r := range eg.Replicas {
		k = appendStr(k, string(r.Device))
		k = appendStr(k, string(r.Node))
		k = appendStr(k, string(r.Tier))
		if r.Bad {
			k = append(k, 1)
		} else {
			k = append(k, 0)
		}
	}
	in.key = k
	if s, ok := in.shapes[string(k)]; ok {
		return s
	}
	s := &egroupShape{open: flags&1 != 0, incompressible: eg.Incompressible, accessed: accessed,
		writer: eg.Writer, codec: eg.Codec, vector: eg.Vector, ec: ec}
	if len(eg.Replicas) > 0 {
		s.replicas = make([]decide.Replica, len(eg.Replicas))
		for i, r := range eg.Replicas {
			s.replicas[i] = decide.Replica{Replica: r.Replica(), Bad: r.Bad}
		}
	}
	in.shapes[string(k)] = s
	return s
}

func appendStr(k []byte, s string) []byte {
	k = binary.AppendUvarint(k, uint64(len(s)))
	return append(k, s...)
}

// view is the decision view of the egroup, equal to what egroupView
// builds from its record and access record.
func (x *egroupRec) view() decide.Egroup {
	s := x.shape
	d := decide.Egroup{ID: x.id, ModRev: x.rev, Open: s.open, Writer: s.writer,
		Size: x.size, Vector: s.vector, Mtime: time.Unix(0, x.mtime),
		Codec: s.codec, Logical: x.logical, Incompressible: s.incompressible, FileBytes: x.fileBytes,
		Replicas: s.replicas, EC: s.ec}
	if s.accessed {
		d.Atime, d.Reads = time.Unix(0, x.atime), x.reads
	}
	return d
}

// egroupIndex finds an egroup's view in a scan's egroups (sorted by ID).
func (r *scanResult) egroupIndex(id uint64) (int, bool) {
	i := sort.Search(len(r.egroups), func(i int) bool { return r.egroups[i].ID >= id })
	return i, i < len(r.egroups) && r.egroups[i].ID == id
}

// vectorOf is the replication vector of an egroup the scan saw (the zero
// vector if it saw none).
func (r *scanResult) vectorOf(id uint64) model.Vector {
	if i, ok := r.egroupIndex(id); ok {
		return r.egroups[i].Vector
	}
	return model.Vector{}
}
