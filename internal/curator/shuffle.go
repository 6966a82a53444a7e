package curator

import (
	"cmp"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// The shuffle of a full scan's extent references (Curator §3.1: map
// output goes to reducers by key). Without it, every reference an
// object, version or upload part holds travels from the worker that
// mapped it to the master, which sorts them all by extent ID and joins
// them with the extents. With it, the reduce by extent ID runs on the
// workers:
//
//  1. The master cuts the extent map into its 16 ID partitions and picks
//     a reducer for each (the node the balancer assigned the partition
//     to). Every owner partition's map — on a worker or on the master —
//     routes each reference to the reducer of its extent's partition in
//     chunks (PushShuffle, or the node's own ShuffleStore) and returns
//     only its history, cut points and how many references it sent to
//     each reducer.
//  2. Each reducer maps its extent partition, joins it with the
//     references it received from exactly the map attempts the master
//     names (ShuffleSpec.Expect; a map that failed part way and was run
//     again elsewhere left a stale contribution that is ignored) and
//     sends the master its extents with one reference per distinct
//     bucket naming each — the first reference in scan order among
//     those with a bucket, which names the egroup's bucket, keeps its
//     position — and every referenced ID that has no extent record.
//  3. The master's reduce by egroup (joinFull) runs as before on those.
//
// What the master receives per extent is then bounded by the buckets
// referencing it, not by the references (versions, snapshots, clones and
// deduplicated copies all reference one extent), and it neither keeps nor
// sorts the references. The result is identical to a scan on one node:
// the joined references compare in the same order, and joinFull's folds
// (the first bucket, the policies of every bucket) do not depend on how
// many references of one bucket there were.
//
// Any failure of the shuffle — a reducer that is down or restarted (its
// contributions are in its memory only), a push that fails, a worker
// that predates the shuffle — makes the master run the extent side again
// the way it did before (scanOwners with references to the master):
// a shuffle can slow a scan but never change what it finds. A node's
// ShuffleStore keeps contributions past a memory budget in spilled files
// (spill.go) and drops a shuffle nobody touched for shuffleTTL.

// ShuffleSpec is a partition's part in a scan's shuffle. An owner
// partition carries Routes (where its references go); an extent
// partition carries Expect (the contributions its reduce joins).
type ShuffleSpec struct {
	// ID names the scan's shuffle on every node.
	ID     string          `json:"id"`
	Routes []ShuffleRoute  `json:"routes,omitempty"`
	Expect []ShuffleSource `json:"expect,omitempty"`
}

// ShuffleRoute sends the references to extents in [Lo, Hi] to the node
// that reduces extent partition Part.
type ShuffleRoute struct {
	Part string       `json:"part"`
	Lo   uint64       `json:"lo"`
	Hi   uint64       `json:"hi"`
	Node model.NodeID `json:"node"`
}

// ShuffleSource is one contribution a reducer joins: the references
// owner partition Src sent when Mapper mapped it, Refs of them.
type ShuffleSource struct {
	Src    string       `json:"src"`
	Mapper model.NodeID `json:"mapper"`
	Refs   int          `json:"refs"`
}

// ShuffleCount is how many references an owner partition's map sent to
// the reducer of extent partition Dst.
type ShuffleCount struct {
	Dst  string
	Refs int
}

// ShuffleRef is one reference in flight: the extent's ID, the position
// of the referencing record in scan order (shuffleSeq) and its bucket
// (1 + index into the chunk's names; 0: an upload part).
type ShuffleRef struct {
	ID     uint64
	Seq    uint32
	Bucket uint32
}

// ShuffleChunk is a batch of one owner partition's references to one
// reducer, as one push carries it.
type ShuffleChunk struct {
	ID     string
	Dst    Partition // the extent partition: its name and ID range
	Src    string    // the owner partition
	Mapper model.NodeID
	Names  []string
	Refs   []ShuffleRef
}

// ShuffleEnv is what a node's map stage needs to take part in a shuffle:
// its own ID and store, and a way to push a chunk to another node.
type ShuffleEnv struct {
	Self  model.NodeID
	Store *ShuffleStore
	Push  func(ctx context.Context, node model.NodeID, c ShuffleChunk) error
}

// ShuffleBalancer is a StreamingScanBalancer whose nodes take part in
// shuffles: the master's own owner maps push through it too.
type ShuffleBalancer interface {
	StreamingScanBalancer
	PushShuffle(ctx context.Context, node model.NodeID, c ShuffleChunk) error
}

const (
	// shuffleChunkRefs is how many references a mapper gathers for one
	// reducer before pushing them.
	shuffleChunkRefs = 32 << 10
	// maxShuffleChunkRefs bounds a chunk a node accepts.
	maxShuffleChunkRefs = 1 << 20
	// shuffleTTL is how long a node keeps a shuffle no push or reduce
	// touched (its master failed over, or fell back).
	shuffleTTL = 10 * time.Minute
	// maxShuffles bounds the shuffles a node holds at once.
	maxShuffles = 16
	// seqPosBits is how many bits of a reference's scan-order position
	// number the record within its owner partition.
	seqPosBits = 26
)

// shuffleSeq is the scan-order position of record pos (from 1) of owner
// partition src: the map (in ownerMaps order), the partition, the
// record — the order in which a scan on one node numbers references.
func shuffleSeq(src string, pos uint64) (uint32, error) {
	m, i, err := ownerPartIndex(src)
	if err != nil {
		return 0, err
	}
	if pos >= 1<<seqPosBits {
		return 0, fmt.Errorf("curator: partition %s holds more than %d records, the most a shuffled scan numbers", src, 1<<seqPosBits-1)
	}
	return uint32(m)<<30 | uint32(i)<<seqPosBits | uint32(pos), nil
}

// ownerPartIndex is an owner partition's map (its index in ownerMaps)
// and partition index.
func ownerPartIndex(part string) (mapIdx, idx int, err error) {
	m, err := ParsePartition(part)
	if err != nil {
		return 0, 0, err
	}
	mapIdx = slices.Index(ownerMaps, m)
	if mapIdx < 0 {
		return 0, 0, fmt.Errorf("curator: %s is not an owner partition", part)
	}
	return mapIdx, strings.IndexByte("0123456789abcdef", part[len(part)-1]), nil
}

// checkShuffle validates a partition's shuffle spec received from a
// master.
func (p Partition) checkShuffle() error {
	s := p.Shuffle
	if s == nil {
		return nil
	}
	m, _ := ParsePartition(p.Name)
	if s.ID == "" || len(s.ID) > 128 {
		return fmt.Errorf("curator: partition %s: shuffle ID %q: want 1 to 128 bytes", p.Name, s.ID)
	}
	switch {
	case isOwnerMap(m):
		if len(s.Expect) > 0 || len(s.Routes) == 0 || len(s.Routes) > 16 {
			return fmt.Errorf("curator: partition %s: a shuffled owner partition takes 1 to 16 routes and nothing to expect", p.Name)
		}
		next := uint64(0)
		for i, r := range s.Routes {
			if mr, err := ParsePartition(r.Part); err != nil || mr != "extents" {
				return fmt.Errorf("curator: partition %s: route to %q: not an extent partition", p.Name, r.Part)
			}
			if r.Lo != next || r.Hi < r.Lo || r.Node == "" {
				return fmt.Errorf("curator: partition %s: route %d [%d, %d] to %q does not continue the routes before it", p.Name, i, r.Lo, r.Hi, r.Node)
			}
			next = r.Hi + 1
			if r.Hi == math.MaxUint64 && i != len(s.Routes)-1 {
				return fmt.Errorf("curator: partition %s: routes past the end of the ID space", p.Name)
			}
		}
		if s.Routes[len(s.Routes)-1].Hi != math.MaxUint64 {
			return fmt.Errorf("curator: partition %s: routes end at %d, before the end of the ID space", p.Name, s.Routes[len(s.Routes)-1].Hi)
		}
	case m == "extents":
		if len(s.Routes) > 0 || len(s.Expect) > 3*16 {
			return fmt.Errorf("curator: partition %s: a reduce takes no routes and at most 48 sources", p.Name)
		}
		seen := map[string]bool{}
		for _, x := range s.Expect {
			if _, _, err := ownerPartIndex(x.Src); err != nil {
				return fmt.Errorf("curator: partition %s: source %w", p.Name, err)
			}
			if x.Mapper == "" || x.Refs <= 0 || seen[x.Src] {
				return fmt.Errorf("curator: partition %s: source %s on %q with %d references (want one mapper, more than none, once)", p.Name, x.Src, x.Mapper, x.Refs)
			}
			seen[x.Src] = true
		}
	default:
		return fmt.Errorf("curator: partition %s takes no part in a shuffle", p.Name)
	}
	return nil
}

// shuffleFrame is a chunk on the wire.
type shuffleFrame struct {
	Names []string
	Refs  []ShuffleRef
}

// WriteShuffleChunk encodes c's names and references (its identity
// travels beside it, in the request).
func WriteShuffleChunk(w io.Writer, c ShuffleChunk) error {
	return gob.NewEncoder(w).Encode(shuffleFrame{Names: c.Names, Refs: c.Refs})
}

// ReadShuffleChunk decodes a chunk pushed for shuffle id from owner
// partition src, mapped by mapper, to the reducer of dst, and checks it
// (Check).
func ReadShuffleChunk(r io.Reader, id string, dst Partition, src string, mapper model.NodeID) (ShuffleChunk, error) {
	var f shuffleFrame
	if err := gob.NewDecoder(r).Decode(&f); err != nil {
		return ShuffleChunk{}, fmt.Errorf("curator: shuffle chunk: %w", err)
	}
	c := ShuffleChunk{ID: id, Dst: dst, Src: src, Mapper: mapper, Names: f.Names, Refs: f.Refs}
	return c, c.Check()
}

// Check verifies a chunk before a store keeps it: a known shuffle ID
// shape, an extent partition as destination, references inside it, each
// numbered within its owner partition and naming a bucket the chunk
// names (none for an upload part).
func (c ShuffleChunk) Check() error {
	if c.ID == "" || len(c.ID) > 128 || c.Mapper == "" {
		return fmt.Errorf("curator: shuffle chunk: needs a shuffle ID (at most 128 bytes) and a mapper")
	}
	if m, err := ParsePartition(c.Dst.Name); err != nil || m != "extents" {
		return fmt.Errorf("curator: shuffle chunk: destination %q is not an extent partition", c.Dst.Name)
	}
	if c.Dst.Lo > c.Dst.Hi {
		return fmt.Errorf("curator: shuffle chunk: destination range [%d, %d] is empty", c.Dst.Lo, c.Dst.Hi)
	}
	mi, pi, err := ownerPartIndex(c.Src)
	if err != nil {
		return fmt.Errorf("curator: shuffle chunk: source: %w", err)
	}
	if len(c.Refs) > maxShuffleChunkRefs || len(c.Names) > maxShuffleChunkRefs {
		return fmt.Errorf("curator: shuffle chunk: %d references and %d names, at most %d each", len(c.Refs), len(c.Names), maxShuffleChunkRefs)
	}
	upload := ownerMaps[mi] == "uploads"
	if upload && len(c.Names) > 0 {
		return fmt.Errorf("curator: shuffle chunk: upload parts name no bucket")
	}
	for _, r := range c.Refs {
		switch {
		case r.ID < c.Dst.Lo || r.ID > c.Dst.Hi:
			return fmt.Errorf("curator: shuffle chunk: extent %016x is not in %s [%016x, %016x]", r.ID, c.Dst.Name, c.Dst.Lo, c.Dst.Hi)
		case int(r.Seq>>30) != mi || int(r.Seq>>seqPosBits&15) != pi || r.Seq&(1<<seqPosBits-1) == 0:
			return fmt.Errorf("curator: shuffle chunk: position %#x is not a record of %s", r.Seq, c.Src)
		case int(r.Bucket) > len(c.Names) || !upload && r.Bucket == 0:
			return fmt.Errorf("curator: shuffle chunk: bucket %d of %d named", r.Bucket, len(c.Names))
		}
	}
	return nil
}

// ShuffleStore holds the shuffled references a node received as a
// reducer until its reduce takes them.
type ShuffleStore struct {
	dir    string
	budget int64
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	shuffles map[string]*shuffleState
}

// NewShuffleStore returns a store keeping up to budget bytes of
// references on the heap (then in unlinked files in dir; budget <= 0:
// no bound).
func NewShuffleStore(dir string, budget int64, log *slog.Logger) *ShuffleStore {
	if log == nil {
		log = slog.Default()
	}
	return &ShuffleStore{dir: dir, budget: budget, log: log, now: time.Now, shuffles: map[string]*shuffleState{}}
}

type shuffleState struct {
	spill   *spill
	touched time.Time
	parts   map[contribKey]*contrib
	active  int // reduces using references from spill
}

type contribKey struct {
	dst, src string
	mapper   model.NodeID
}

// contrib is what one map attempt of one owner partition sent to one
// reducer: its references, buckets renumbered into names.
type contrib struct {
	names  []string
	index  map[string]uint32
	refs   spillRun[ShuffleRef]
	chunks int
}

// Receive keeps a checked chunk (Check) for its reducer.
func (s *ShuffleStore) Receive(c ShuffleChunk) error {
	if err := c.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	st := s.shuffles[c.ID]
	if st == nil {
		if len(s.shuffles) >= maxShuffles {
			return fmt.Errorf("curator: shuffle %s: this node holds %d shuffles already", c.ID, maxShuffles)
		}
		st = &shuffleState{spill: newSpill(s.dir, s.budget, s.log), parts: map[contribKey]*contrib{}}
		s.shuffles[c.ID] = st
	}
	st.touched = s.now()
	k := contribKey{c.Dst.Name, c.Src, c.Mapper}
	ct := st.parts[k]
	if ct == nil {
		ct = &contrib{index: map[string]uint32{}, refs: spillRun[ShuffleRef]{s: st.spill}}
		st.parts[k] = ct
	}
	remap := make([]uint32, len(c.Names)+1)
	for i, n := range c.Names {
		b, ok := ct.index[n]
		if !ok {
			ct.names = append(ct.names, n)
			b = uint32(len(ct.names))
			ct.index[n] = b
		}
		remap[i+1] = b
	}
	for _, r := range c.Refs {
		r.Bucket = remap[r.Bucket]
		ct.refs.add(r)
	}
	ct.chunks++
	return nil
}

// sweepLocked drops shuffles untouched for shuffleTTL.
func (s *ShuffleStore) sweepLocked() {
	now := s.now()
	for id, st := range s.shuffles {
		if now.Sub(st.touched) > shuffleTTL && st.active == 0 {
			s.log.Warn("curator: dropping a shuffle nobody reduced", "shuffle", id, "idle", now.Sub(st.touched).Round(time.Second))
			s.dropLocked(id)
		}
	}
}

func (s *ShuffleStore) dropLocked(id string) {
	st := s.shuffles[id]
	if st == nil {
		return
	}
	for _, ct := range st.parts {
		ct.refs.free()
	}
	st.spill.release()
	delete(s.shuffles, id)
}

// Shuffles is how many shuffles the store holds.
func (s *ShuffleStore) Shuffles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shuffles)
}

// take hands the reduce of dst in shuffle id the expected
// contributions' references sorted by extent ID and position, with the
// bucket names they index (1 + index; 0: an upload part), and forgets
// every contribution to dst (a stale attempt's too). free releases the
// references. A missing or incomplete contribution is an error: the
// master then falls back to reducing on its own.
func (s *ShuffleStore) take(id, dst string, expect []ShuffleSource) (refs []ShuffleRef, names []string, free func(), err error) {
	if s == nil {
		if len(expect) == 0 {
			return nil, nil, func() {}, nil
		}
		return nil, nil, nil, fmt.Errorf("curator: shuffle %s: this node keeps no shuffles", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
	st := s.shuffles[id]
	if st == nil {
		if len(expect) == 0 {
			return nil, nil, func() {}, nil
		}
		return nil, nil, nil, fmt.Errorf("curator: shuffle %s: no references here for %s (the node restarted, or the shuffle expired)", id, dst)
	}
	st.touched = s.now()
	total := 0
	for _, x := range expect {
		ct := st.parts[contribKey{dst, x.Src, x.Mapper}]
		have := 0
		if ct != nil {
			have = ct.refs.len()
		}
		if have != x.Refs {
			return nil, nil, nil, fmt.Errorf("curator: shuffle %s: %s holds %d references from %s mapped on %s, want %d", id, dst, have, x.Src, x.Mapper, x.Refs)
		}
		total += have
	}
	sp := st.spill
	refs = spillSlice[ShuffleRef](sp, total)[:0]
	index := map[string]uint32{}
	for _, x := range expect {
		ct := st.parts[contribKey{dst, x.Src, x.Mapper}]
		remap := make([]uint32, len(ct.names)+1)
		for i, n := range ct.names {
			b, ok := index[n]
			if !ok {
				names = append(names, n)
				b = uint32(len(names))
				index[n] = b
			}
			remap[i+1] = b
		}
		ct.refs.drain(func(r *ShuffleRef) {
			y := *r
			y.Bucket = remap[y.Bucket]
			refs = append(refs, y)
		})
	}
	for k, ct := range st.parts {
		if k.dst == dst {
			ct.refs.free()
			delete(st.parts, k)
		}
	}
	slices.SortFunc(refs, func(a, b ShuffleRef) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	st.active++
	free = func() {
		freeSlice(sp, refs)
		s.mu.Lock()
		defer s.mu.Unlock()
		st.active--
		if s.shuffles[id] == st && st.active == 0 && len(st.parts) == 0 {
			s.dropLocked(id)
		}
	}
	return refs, names, free, nil
}

// mapShuffled is MapPartition for a partition with a shuffle spec: an
// owner partition routes its references to their reducers and emits
// the rest (history, cut points) and, last, a record of what it sent; an
// extent partition is reduced — its extents joined with the references
// env's store received — and emits its extents and the joined references
// (see the top of this file).
func mapShuffled(ctx context.Context, kv PageScanner, p Partition, env ShuffleEnv, emit func(MapRecord) error) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	m, _ := ParsePartition(p.Name)
	if m == "extents" {
		return reduceExtents(ctx, kv, p, env, emit)
	}
	type pending struct {
		route *ShuffleRoute
		names []string
		index map[string]uint32
		refs  []ShuffleRef
		sent  int
	}
	routes := p.Shuffle.Routes
	out := make([]pending, len(routes))
	for i := range routes {
		out[i].route = &routes[i]
	}
	push := func(d *pending) error {
		if len(d.refs) == 0 {
			return nil
		}
		c := ShuffleChunk{ID: p.Shuffle.ID, Dst: Partition{Name: d.route.Part, Lo: d.route.Lo, Hi: d.route.Hi},
			Src: p.Name, Mapper: env.Self, Names: d.names, Refs: d.refs}
		var err error
		if d.route.Node == env.Self {
			if env.Store == nil {
				err = errors.New("this node keeps no shuffles")
			} else {
				err = env.Store.Receive(c)
			}
		} else if env.Push == nil {
			err = errors.New("no way to push to another node")
		} else {
			err = env.Push(ctx, d.route.Node, c)
		}
		if err != nil {
			return fmt.Errorf("curator: shuffle %s: %s to %s on %s: %w", p.Shuffle.ID, p.Name, d.route.Part, d.route.Node, err)
		}
		d.sent += len(d.refs)
		d.names, d.index, d.refs = nil, nil, d.refs[:0]
		return nil
	}
	read, err := MapPartition(ctx, kv, Partition{Name: p.Name, From: p.From, To: p.To, Rev: p.Rev}, func(r MapRecord) error {
		o := r.Owner
		if len(o.Extents) > 0 {
			seq, err := shuffleSeq(p.Name, r.ID)
			if err != nil {
				return err
			}
			for _, id := range o.Extents {
				i, _ := slices.BinarySearchFunc(routes, id, func(rt ShuffleRoute, id uint64) int {
					if rt.Hi < id {
						return -1
					}
					if rt.Lo > id {
						return 1
					}
					return 0
				})
				d := &out[i]
				b := uint32(0)
				if o.Bucket != "" {
					if d.index == nil {
						d.index = map[string]uint32{}
					}
					var ok bool
					if b, ok = d.index[o.Bucket]; !ok {
						d.names = append(d.names, o.Bucket)
						b = uint32(len(d.names))
						d.index[o.Bucket] = b
					}
				}
				d.refs = append(d.refs, ShuffleRef{ID: id, Seq: seq, Bucket: b})
				if len(d.refs) >= shuffleChunkRefs {
					if err := push(d); err != nil {
						return err
					}
				}
			}
		}
		if o.Cut == "" && !o.History {
			return nil
		}
		rest := *o
		rest.Extents = nil
		return emit(MapRecord{ID: r.ID, Owner: &rest})
	})
	if err != nil {
		return read, err
	}
	sent := &shuffled{mapper: env.Self}
	for i := range out {
		if err := push(&out[i]); err != nil {
			return read, err
		}
		if out[i].sent > 0 {
			sent.counts = append(sent.counts, ShuffleCount{Dst: out[i].route.Part, Refs: out[i].sent})
		}
	}
	return read, emit(MapRecord{shuffled: sent})
}

// shuffled is what an owner partition's shuffled map sent, by reducer.
type shuffled struct {
	mapper model.NodeID
	counts []ShuffleCount
}

// reduceExtents is the reduce of an extent partition in a shuffle: it
// maps the partition's extents and joins them with the references the
// store received for it, emitting each extent and, in ID order, the
// references the master's join needs — per extent one per distinct
// bucket (the first in scan order among those with a bucket keeps its
// position; the others, and upload parts', come after every position)
// — and one per referenced ID without an extent record.
func reduceExtents(ctx context.Context, kv PageScanner, p Partition, env ShuffleEnv, emit func(MapRecord) error) (int, error) {
	refs, names, free, err := env.Store.take(p.Shuffle.ID, p.Name, p.Shuffle.Expect)
	if err != nil {
		return 0, err
	}
	defer free()
	bucket := func(b uint32) string {
		if b == 0 {
			return ""
		}
		return names[b-1]
	}
	j := 0
	var seen []uint32
	// joined emits the references to extent id (refs[j:] start there).
	joined := func(id uint64) error {
		first := -1
		seen = seen[:0]
		for ; j < len(refs) && refs[j].ID == id; j++ {
			r := refs[j]
			if r.Bucket != 0 && first < 0 {
				first = j
			}
			if !slices.Contains(seen, r.Bucket) {
				seen = append(seen, r.Bucket)
			}
		}
		for _, b := range seen {
			seq := uint32(math.MaxUint32)
			if first >= 0 && b == refs[first].Bucket {
				seq = refs[first].Seq
			}
			if err := emit(MapRecord{ID: id, isRef: true, refSeq: seq, refBucket: bucket(b)}); err != nil {
				return err
			}
		}
		return nil
	}
	// unresolved emits the referenced IDs below id with no extent.
	unresolved := func(id uint64, last bool) error {
		for j < len(refs) && (last || refs[j].ID < id) {
			x := refs[j].ID
			for j < len(refs) && refs[j].ID == x {
				j++
			}
			if err := emit(MapRecord{ID: x, isRef: true, refSeq: math.MaxUint32}); err != nil {
				return err
			}
		}
		return nil
	}
	read, err := MapPartition(ctx, kv, Partition{Name: p.Name, Lo: p.Lo, Hi: p.Hi, Rev: p.Rev}, func(r MapRecord) error {
		if err := unresolved(r.ID, false); err != nil {
			return err
		}
		if err := emit(r); err != nil {
			return err
		}
		return joined(r.ID)
	})
	if err != nil {
		return read, err
	}
	return read, unresolved(0, true)
}

// Drop forgets shuffle id (a master that fell back drops its own share
// at once; the others expire).
func (s *ShuffleStore) Drop(id string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.shuffles[id]; st != nil && st.active == 0 {
		s.dropLocked(id)
	}
}
