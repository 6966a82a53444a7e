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

// The shuffle of a full scan (Curator §3.1: map output goes to reducers
// by key, and the reducers emit what the decisions need). Without it,
// every extent record and every reference an object, version or upload
// part holds travels to the master, which sorts the references, joins
// them with the extents and the extents with the egroups. With it, both
// joins run on the nodes, and the master receives per egroup what the
// decisions read:
//
//  1. Owner partitions (objects, versions, upload parts), mapped on the
//     nodes the balancer assigned them to, route each reference to the
//     reducer of its extent's ID partition (the node assigned that
//     extent partition) in chunks, and send the master only their
//     history, cut points and how many references went to each reducer.
//  2. Each extent reducer maps its extent partition and joins it with the
//     references it received from exactly the map attempts the master
//     names (ShuffleSpec.Expect: an attempt that failed part way and was
//     run again elsewhere left a stale contribution, which is ignored).
//     It routes each extent — with whether anything references it, and
//     one reference per distinct bucket naming it: the first in scan
//     order among those with a bucket keeps its position — to the
//     reducer of its egroup's ID partition, and sends the master the
//     referenced IDs that have no extent record (dangling references).
//  3. Each egroup reducer maps its egroup partition (the compact egroups
//     the master keeps, as in every scan) and reduces the extents it
//     received by egroup: live and dead extents, live bytes (a location
//     several extents share counts once), the tail end (garbage excluded:
//     data removal deletes it first), the first bucket and the set of
//     buckets. It sends these aggregates, and only the extents the master
//     acts on: garbage past the grace period, live extents with a
//     fingerprint (dedup), live extents of egroups it does not have
//     (dangling), and the live extents of egroups a rewrite may need them
//     for ("listed": dead data, a codec or an erasure code, or a bucket
//     with a transform policy). A rewrite task of an egroup that is not
//     listed is dropped, never run with a partial list.
//
// The result is what a scan on one node finds, with the live-extent lists
// limited to listed egroups. Any failure — a reducer down or restarted
// (its contributions are in its memory), a push refused, a node of a
// version without shuffles — makes the master scan again without one: a
// shuffle can slow a scan but never change what it finds. A node's
// ShuffleStore keeps contributions past a memory budget in spilled files
// (spill.go) and drops a shuffle nobody touched for shuffleTTL.
//
// The master accepts a reduce only whole: an egroup partition's stream
// must end naming its reducer and its aggregates must account for every
// extent sent to it, and a listed egroup's extents must all arrive — a
// partition mapped without its reduce would otherwise pass for egroups
// without extents, and data removal would delete them (docs/design/0000
// invariant 9).

// ShuffleSpec is a partition's part in a scan's shuffle: an owner
// partition has Routes (to the extent reducers); an extent partition has
// Expect (the owner maps' contributions) and Routes (to the egroup
// reducers); an egroup partition has Expect (the extent reducers'
// contributions), GarbageBefore and PolicyBuckets.
type ShuffleSpec struct {
	// ID names the scan's shuffle on every node.
	ID     string          `json:"id"`
	Routes []ShuffleRoute  `json:"routes,omitempty"`
	Expect []ShuffleSource `json:"expect,omitempty"`
	// GarbageBefore: an unreferenced extent created at or before this
	// time (Unix nanoseconds; the scan's start less the grace period) is
	// garbage data removal deletes.
	GarbageBefore int64 `json:"garbage_before,omitempty"`
	// PolicyBuckets are the buckets with a transform policy: an egroup
	// holding data of one is listed (its live extents sent). Past
	// maxPolicyBuckets the master sets ListAll instead (every egroup
	// listed), keeping the spec small enough for a request.
	PolicyBuckets []string `json:"policy_buckets,omitempty"`
	ListAll       bool     `json:"list_all,omitempty"`
}

// maxPolicyBuckets bounds the policy buckets a spec names.
const maxPolicyBuckets = 1024

// ShuffleRoute sends what belongs to IDs in [Lo, Hi] — references by
// extent ID, extents by egroup ID — to the node that reduces Part.
type ShuffleRoute struct {
	Part string       `json:"part"`
	Lo   uint64       `json:"lo"`
	Hi   uint64       `json:"hi"`
	Node model.NodeID `json:"node"`
}

// ShuffleSource is one contribution a reducer joins: what partition Src
// sent when Mapper mapped it, Count records (references to an extent
// reducer, extents to an egroup reducer).
type ShuffleSource struct {
	Src    string       `json:"src"`
	Mapper model.NodeID `json:"mapper"`
	Count  int          `json:"count"`
}

// ShuffleCount is how many records a partition's map sent to the
// reducer of Dst.
type ShuffleCount struct {
	Dst   string
	Count int
}

// ShuffleRef is a reference in flight: the extent's ID, the position of
// the referencing record in scan order (shuffleSeq; math.MaxUint32 on a
// joined reference that is not an extent's first) and its bucket (1 +
// index into the chunk's names; 0: an upload part).
type ShuffleRef struct {
	ID     uint64
	Seq    uint32
	Bucket uint32
}

// ShuffleExtent is an extent on its way to its egroup's reducer: the
// fields the reduce reads and whether anything references it.
type ShuffleExtent struct {
	ID                      uint64
	Rev                     int64
	Egroup                  uint64
	Off, Len, Stored, Ctime int64
	FP                      []byte
	Live                    bool
}

// ShuffleChunk is a batch of one partition's records for one reducer, as
// one push carries it: references to an extent reducer, or extents with
// their joined references (Refs name extents of the chunk) to an egroup
// reducer.
type ShuffleChunk struct {
	ID      string
	Dst     Partition // the reducer's partition: its name and ID range
	Src     string    // the partition mapped
	Mapper  model.NodeID
	Names   []string
	Refs    []ShuffleRef
	Extents []ShuffleExtent
}

// count is what the chunk adds to its contribution's count.
func (c ShuffleChunk) count() int {
	if strings.HasPrefix(c.Dst.Name, "egroups/") {
		return len(c.Extents)
	}
	return len(c.Refs)
}

// ShuffleEnv is what a node's map stage needs to take part in a shuffle:
// its own ID and store, and a way to push a chunk to another node.
type ShuffleEnv struct {
	Self  model.NodeID
	Store *ShuffleStore
	Push  func(ctx context.Context, node model.NodeID, c ShuffleChunk) error
}

// ShuffleBalancer is a StreamingScanBalancer whose nodes take part in
// shuffles: the master's own maps push through it too.
type ShuffleBalancer interface {
	StreamingScanBalancer
	PushShuffle(ctx context.Context, node model.NodeID, c ShuffleChunk) error
}

const (
	// shuffleChunkRecords is how many references or extents a mapper
	// gathers for one reducer before pushing them.
	shuffleChunkRecords = 16 << 10
	// maxShuffleChunkRecords bounds a chunk a node accepts.
	maxShuffleChunkRecords = 1 << 20
	// shuffleTTL is how long a node keeps a shuffle no push or reduce
	// touched (its master failed over, or fell back): longer than one
	// partition's map may take (mapPartitionTimeout on the master is 10
	// minutes), so that a reducer's contributions outlive the slowest
	// partition of the step before its reduce.
	shuffleTTL = 30 * time.Minute
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

// checkRoutes verifies routes tile the ID space in order, each to a
// partition of map to and a node.
func checkRoutes(part string, routes []ShuffleRoute, to string) error {
	if len(routes) == 0 || len(routes) > 16 {
		return fmt.Errorf("curator: partition %s: %d routes, want 1 to 16", part, len(routes))
	}
	next := uint64(0)
	for i, r := range routes {
		if m, err := ParsePartition(r.Part); err != nil || m != to {
			return fmt.Errorf("curator: partition %s: route to %q: not a partition of %s", part, r.Part, to)
		}
		if r.Lo != next || r.Hi < r.Lo || r.Node == "" {
			return fmt.Errorf("curator: partition %s: route %d [%d, %d] to %q does not continue the routes before it", part, i, r.Lo, r.Hi, r.Node)
		}
		if r.Hi == math.MaxUint64 && i != len(routes)-1 {
			return fmt.Errorf("curator: partition %s: routes past the end of the ID space", part)
		}
		next = r.Hi + 1
	}
	if routes[len(routes)-1].Hi != math.MaxUint64 {
		return fmt.Errorf("curator: partition %s: routes end at %d, before the end of the ID space", part, routes[len(routes)-1].Hi)
	}
	return nil
}

// checkSources verifies a reduce's expected contributions: partitions of
// the map that feeds it, once each, from a mapper, more than none.
func checkSources(part string, expect []ShuffleSource, from func(string) bool) error {
	if len(expect) > 3*16 {
		return fmt.Errorf("curator: partition %s: %d sources, at most 48", part, len(expect))
	}
	seen := map[string]bool{}
	for _, x := range expect {
		if !from(x.Src) || x.Mapper == "" || x.Count <= 0 || seen[x.Src] {
			return fmt.Errorf("curator: partition %s: source %q on %q with %d records (want a feeding partition, a mapper, more than none, once)", part, x.Src, x.Mapper, x.Count)
		}
		seen[x.Src] = true
	}
	return nil
}

func isOwnerPart(p string) bool  { _, _, err := ownerPartIndex(p); return err == nil }
func isExtentPart(p string) bool { m, err := ParsePartition(p); return err == nil && m == "extents" }
func isEgroupPart(p string) bool { m, err := ParsePartition(p); return err == nil && m == "egroups" }
func routeOf(routes []ShuffleRoute, id uint64) int {
	i, _ := slices.BinarySearchFunc(routes, id, func(rt ShuffleRoute, id uint64) int {
		if rt.Hi < id {
			return -1
		}
		if rt.Lo > id {
			return 1
		}
		return 0
	})
	return i
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
	if m != "egroups" && (s.GarbageBefore != 0 || len(s.PolicyBuckets) > 0 || s.ListAll) {
		return fmt.Errorf("curator: partition %s: only an egroup reduce takes a garbage time or policy buckets", p.Name)
	}
	switch {
	case isOwnerMap(m):
		if len(s.Expect) > 0 {
			return fmt.Errorf("curator: partition %s: an owner partition expects nothing", p.Name)
		}
		return checkRoutes(p.Name, s.Routes, "extents")
	case m == "extents":
		if err := checkRoutes(p.Name, s.Routes, "egroups"); err != nil {
			return err
		}
		return checkSources(p.Name, s.Expect, isOwnerPart)
	default: // egroups
		if len(s.Routes) > 0 || len(s.PolicyBuckets) > maxPolicyBuckets {
			return fmt.Errorf("curator: partition %s: an egroup reduce routes nothing and takes at most %d policy buckets", p.Name, maxPolicyBuckets)
		}
		return checkSources(p.Name, s.Expect, isExtentPart)
	}
}

// shuffleFrame is a chunk on the wire.
type shuffleFrame struct {
	Names   []string
	Refs    []ShuffleRef
	Extents []ShuffleExtent
}

// WriteShuffleChunk encodes c's records (its identity travels beside
// it, in the request).
func WriteShuffleChunk(w io.Writer, c ShuffleChunk) error {
	return gob.NewEncoder(w).Encode(shuffleFrame{Names: c.Names, Refs: c.Refs, Extents: c.Extents})
}

// ReadShuffleChunk decodes a chunk pushed for shuffle id from partition
// src, mapped by mapper, to the reducer of dst, and checks it (Check).
func ReadShuffleChunk(r io.Reader, id string, dst Partition, src string, mapper model.NodeID) (ShuffleChunk, error) {
	var f shuffleFrame
	if err := gob.NewDecoder(r).Decode(&f); err != nil {
		return ShuffleChunk{}, fmt.Errorf("curator: shuffle chunk: %w", err)
	}
	c := ShuffleChunk{ID: id, Dst: dst, Src: src, Mapper: mapper, Names: f.Names, Refs: f.Refs, Extents: f.Extents}
	return c, c.Check()
}

// Check verifies a chunk before a store keeps it. To an extent reducer:
// references from an owner partition, inside the reducer's range, each
// numbered within its partition and naming a bucket the chunk names
// (none for an upload part). To an egroup reducer: extents from an
// extent partition, of egroups inside the reducer's range, in ID order,
// with joined references to them only.
func (c ShuffleChunk) Check() error {
	if c.ID == "" || len(c.ID) > 128 || c.Mapper == "" {
		return fmt.Errorf("curator: shuffle chunk: needs a shuffle ID (at most 128 bytes) and a mapper")
	}
	if c.Dst.Lo > c.Dst.Hi {
		return fmt.Errorf("curator: shuffle chunk: destination range [%d, %d] is empty", c.Dst.Lo, c.Dst.Hi)
	}
	if len(c.Refs) > maxShuffleChunkRecords || len(c.Names) > maxShuffleChunkRecords || len(c.Extents) > maxShuffleChunkRecords {
		return fmt.Errorf("curator: shuffle chunk: more than %d records", maxShuffleChunkRecords)
	}
	switch {
	case isExtentPart(c.Dst.Name):
		mi, pi, err := ownerPartIndex(c.Src)
		if err != nil {
			return fmt.Errorf("curator: shuffle chunk to %s: source: %w", c.Dst.Name, err)
		}
		upload := ownerMaps[mi] == "uploads"
		if upload && len(c.Names) > 0 || len(c.Extents) > 0 {
			return fmt.Errorf("curator: shuffle chunk to %s: references only, and none with a bucket from upload parts", c.Dst.Name)
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
	case isEgroupPart(c.Dst.Name):
		if !isExtentPart(c.Src) {
			return fmt.Errorf("curator: shuffle chunk to %s: source %q is not an extent partition", c.Dst.Name, c.Src)
		}
		j := 0
		for i, x := range c.Extents {
			switch {
			case x.Egroup < c.Dst.Lo || x.Egroup > c.Dst.Hi:
				return fmt.Errorf("curator: shuffle chunk: extent %016x of egroup %016x is not for %s [%016x, %016x]", x.ID, x.Egroup, c.Dst.Name, c.Dst.Lo, c.Dst.Hi)
			case i > 0 && c.Extents[i-1].ID >= x.ID:
				return fmt.Errorf("curator: shuffle chunk: extent %016x after %016x (out of order)", x.ID, c.Extents[i-1].ID)
			case x.Off < 0 || x.Len < 0 || x.Stored < 0 || len(x.FP) > 64:
				return fmt.Errorf("curator: shuffle chunk: extent %016x: negative offset or length, or a fingerprint over 64 bytes", x.ID)
			}
			for ; j < len(c.Refs) && c.Refs[j].ID == x.ID; j++ {
				if int(c.Refs[j].Bucket) > len(c.Names) || !x.Live {
					return fmt.Errorf("curator: shuffle chunk: a reference to extent %016x names bucket %d of %d or the extent is not live", x.ID, c.Refs[j].Bucket, len(c.Names))
				}
			}
		}
		if j != len(c.Refs) {
			return fmt.Errorf("curator: shuffle chunk: reference to %016x, not an extent of the chunk (or out of order)", c.Refs[j].ID)
		}
	default:
		return fmt.Errorf("curator: shuffle chunk: destination %q is not an extent or egroup partition", c.Dst.Name)
	}
	return nil
}

// ShuffleStore holds what a node received as a reducer until its reduce
// takes it.
type ShuffleStore struct {
	dir    string
	budget int64
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	shuffles map[string]*shuffleState
}

// NewShuffleStore returns a store keeping up to budget bytes of
// references and extents on the heap (then in unlinked files in dir;
// budget <= 0: no bound).
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
	active  int // reduces using arrays from spill
}

// contribKey names a contribution: the reducer's partition (with its
// range: a reduce takes only what was sent for exactly its range), the
// partition mapped and who mapped it.
type contribKey struct {
	dst, src string
	lo, hi   uint64
	mapper   model.NodeID
}

// contrib is what one map attempt of one partition sent to one reducer:
// references (buckets renumbered into names) and extents (fingerprints
// in fps).
type contrib struct {
	names []string
	index map[string]uint32
	refs  spillRun[ShuffleRef]
	xs    spillRun[extentRec]
	fps   [][]byte
	// fpBytes is what fps hold, charged to the shuffle's budget: they
	// stay on the heap, so the arrays spill sooner instead.
	fpBytes int64
	count   int
}

// Receive keeps a checked chunk (Check) for its reducer.
func (s *ShuffleStore) Receive(c ShuffleChunk) error {
	if err := c.Check(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.shuffles[c.ID]
	if st != nil {
		st.touched = s.now() // before sweeping: never the shuffle in use
	}
	s.sweepLocked()
	if st == nil {
		if len(s.shuffles) >= maxShuffles {
			return fmt.Errorf("curator: shuffle %s: this node holds %d shuffles already", c.ID, maxShuffles)
		}
		st = &shuffleState{spill: newSpill(s.dir, s.budget, s.log), parts: map[contribKey]*contrib{}}
		s.shuffles[c.ID] = st
	}
	st.touched = s.now()
	k := contribKey{dst: c.Dst.Name, src: c.Src, lo: c.Dst.Lo, hi: c.Dst.Hi, mapper: c.Mapper}
	ct := st.parts[k]
	if ct == nil {
		ct = &contrib{index: map[string]uint32{}, refs: spillRun[ShuffleRef]{s: st.spill}, xs: spillRun[extentRec]{s: st.spill}}
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
	for _, x := range c.Extents {
		e := extentRec{id: x.ID, modRev: x.Rev, egroup: x.Egroup, off: x.Off, len: x.Len, stored: x.Stored, ctime: x.Ctime, live: x.Live}
		if len(x.FP) > 0 {
			ct.fps = append(ct.fps, x.FP)
			e.fp = uint32(len(ct.fps))
			n := int64(len(x.FP)) + fpOverhead
			st.spill.charge(n)
			ct.fpBytes += n
		}
		ct.xs.add(e)
	}
	ct.count += c.count()
	return nil
}

// fpOverhead is a fingerprint's slice header, counted with its bytes.
const fpOverhead = 24

// free returns a contribution's arrays and its fingerprints' charge.
func (ct *contrib) free(sp *spill) {
	ct.refs.free()
	ct.xs.free()
	sp.freeHeap(ct.fpBytes)
	ct.fps, ct.fpBytes = nil, 0
}

// Sweep drops the shuffles nobody touched for shuffleTTL (a server calls
// it periodically; pushes and reduces sweep too).
func (s *ShuffleStore) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked()
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
		ct.free(st.spill)
	}
	st.spill.release()
	delete(s.shuffles, id)
}

// Drop forgets shuffle id (a master that fell back drops its own share
// at once; the other nodes' expire).
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

// Shuffles is how many shuffles the store holds.
func (s *ShuffleStore) Shuffles() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.shuffles)
}

// taken is what a reduce takes from the store: the expected
// contributions' references sorted by extent ID and position, with the
// bucket names they index (1 + index), and extents (in no order) with
// their fingerprints (1 + index into fps).
type taken struct {
	refs  []ShuffleRef
	names []string
	xs    []extentRec
	fps   [][]byte
	free  func()
}

// take hands the reduce of partition dst in shuffle id the expected
// contributions and forgets every contribution to dst (a stale
// attempt's too). A missing or incomplete contribution is an error: the
// master then scans without a shuffle.
func (s *ShuffleStore) take(id string, dst Partition, expect []ShuffleSource) (taken, error) {
	none := taken{free: func() {}}
	if s == nil {
		if len(expect) == 0 {
			return none, nil
		}
		return taken{}, fmt.Errorf("curator: shuffle %s: this node keeps no shuffles", id)
	}
	s.mu.Lock()
	st := s.shuffles[id]
	if st != nil {
		st.touched = s.now() // before sweeping: never the shuffle in use
	}
	s.sweepLocked()
	if st == nil {
		s.mu.Unlock()
		if len(expect) == 0 {
			return none, nil
		}
		return taken{}, fmt.Errorf("curator: shuffle %s: nothing here for %s (the node restarted, or the shuffle expired)", id, dst.Name)
	}
	key := func(x ShuffleSource) contribKey {
		return contribKey{dst: dst.Name, src: x.Src, lo: dst.Lo, hi: dst.Hi, mapper: x.Mapper}
	}
	nrefs, nxs := 0, 0
	for _, x := range expect {
		ct := st.parts[key(x)]
		have := 0
		if ct != nil {
			have = ct.count
		}
		if have != x.Count {
			s.mu.Unlock()
			return taken{}, fmt.Errorf("curator: shuffle %s: %s [%d, %d] holds %d records from %s mapped on %s, want %d", id, dst.Name, dst.Lo, dst.Hi, have, x.Src, x.Mapper, x.Count)
		}
		nrefs += ct.refs.len()
		nxs += ct.xs.len()
	}
	// The contributions leave the store now (a stale attempt's are
	// dropped); the copying and sorting happen outside its lock, so
	// pushes to other reducers here do not wait for them.
	var mine []*contrib
	for _, x := range expect {
		mine = append(mine, st.parts[key(x)])
	}
	for k, ct := range st.parts {
		if k.dst == dst.Name {
			if !slices.Contains(mine, ct) {
				ct.free(st.spill)
			}
			delete(st.parts, k)
		}
	}
	st.active++
	s.mu.Unlock()

	sp := st.spill
	t := taken{refs: spillSlice[ShuffleRef](sp, nrefs)[:0], xs: spillSlice[extentRec](sp, nxs)[:0]}
	index := map[string]uint32{}
	var fpBytes int64 // the taken fingerprints' charge, returned by free
	for _, ct := range mine {
		remap := make([]uint32, len(ct.names)+1)
		for i, n := range ct.names {
			b, ok := index[n]
			if !ok {
				t.names = append(t.names, n)
				b = uint32(len(t.names))
				index[n] = b
			}
			remap[i+1] = b
		}
		ct.refs.drain(func(r *ShuffleRef) {
			y := *r
			y.Bucket = remap[y.Bucket]
			t.refs = append(t.refs, y)
		})
		base := uint32(len(t.fps))
		t.fps = append(t.fps, ct.fps...)
		fpBytes += ct.fpBytes
		ct.xs.drain(func(x *extentRec) {
			y := *x
			if y.fp != 0 {
				y.fp += base
			}
			t.xs = append(t.xs, y)
		})
	}
	slices.SortFunc(t.refs, func(a, b ShuffleRef) int {
		if c := cmp.Compare(a.ID, b.ID); c != 0 {
			return c
		}
		return cmp.Compare(a.Seq, b.Seq)
	})
	refs, xs := t.refs, t.xs
	t.free = func() {
		freeSlice(sp, refs)
		freeSlice(sp, xs)
		sp.freeHeap(fpBytes)
		s.mu.Lock()
		defer s.mu.Unlock()
		st.active--
		if s.shuffles[id] == st && st.active == 0 && len(st.parts) == 0 {
			s.dropLocked(id)
		}
	}
	return t, nil
}

// ShufflePushError is a push to a reducer that failed: the reducer's
// node, not the mapper, is the one to leave out of the next scans.
type ShufflePushError struct {
	Node model.NodeID
	Err  error
}

func (e *ShufflePushError) Error() string { return e.Err.Error() }
func (e *ShufflePushError) Unwrap() error { return e.Err }

// pushBuffer gathers one partition's records for one reducer and
// pushes them a chunk at a time.
type pushBuffer struct {
	route *ShuffleRoute
	names []string
	index map[string]uint32
	refs  []ShuffleRef
	xs    []ShuffleExtent
	sent  int
}

func (d *pushBuffer) bucket(name string) uint32 {
	if name == "" {
		return 0
	}
	if d.index == nil {
		d.index = map[string]uint32{}
	}
	b, ok := d.index[name]
	if !ok {
		d.names = append(d.names, name)
		b = uint32(len(d.names))
		d.index[name] = b
	}
	return b
}

// pushers routes one partition's records to the reducers of its spec's
// routes.
type pushers struct {
	ctx  context.Context
	p    Partition
	env  ShuffleEnv
	bufs []pushBuffer
}

func newPushers(ctx context.Context, p Partition, env ShuffleEnv) *pushers {
	ps := &pushers{ctx: ctx, p: p, env: env, bufs: make([]pushBuffer, len(p.Shuffle.Routes))}
	for i := range ps.bufs {
		ps.bufs[i].route = &p.Shuffle.Routes[i]
	}
	return ps
}

// to is the buffer of the reducer of id.
func (ps *pushers) to(id uint64) *pushBuffer { return &ps.bufs[routeOf(ps.p.Shuffle.Routes, id)] }

// full pushes d if it holds a chunk's worth.
func (ps *pushers) full(d *pushBuffer) error {
	if len(d.refs) < shuffleChunkRecords && len(d.xs) < shuffleChunkRecords {
		return nil
	}
	return ps.push(d)
}

func (ps *pushers) push(d *pushBuffer) error {
	if len(d.refs) == 0 && len(d.xs) == 0 {
		return nil
	}
	c := ShuffleChunk{ID: ps.p.Shuffle.ID, Dst: Partition{Name: d.route.Part, Lo: d.route.Lo, Hi: d.route.Hi},
		Src: ps.p.Name, Mapper: ps.env.Self, Names: d.names, Refs: d.refs, Extents: d.xs}
	var err error
	switch {
	case d.route.Node == ps.env.Self && ps.env.Store != nil:
		err = ps.env.Store.Receive(c)
	case d.route.Node == ps.env.Self:
		err = errors.New("this node keeps no shuffles")
	case ps.env.Push == nil:
		err = errors.New("no way to push to another node")
	default:
		err = ps.env.Push(ps.ctx, d.route.Node, c)
	}
	if err != nil {
		return &ShufflePushError{Node: d.route.Node,
			Err: fmt.Errorf("curator: shuffle %s: %s to %s on %s: %w", ps.p.Shuffle.ID, ps.p.Name, d.route.Part, d.route.Node, err)}
	}
	d.sent += c.count()
	d.names, d.index, d.refs, d.xs = nil, nil, d.refs[:0], d.xs[:0]
	return nil
}

// finish pushes what is left and returns the record of what was sent.
func (ps *pushers) finish() (*shuffled, error) {
	sent := &shuffled{mapper: ps.env.Self}
	for i := range ps.bufs {
		d := &ps.bufs[i]
		if err := ps.push(d); err != nil {
			return nil, err
		}
		if d.sent > 0 {
			sent.counts = append(sent.counts, ShuffleCount{Dst: d.route.Part, Count: d.sent})
		}
	}
	return sent, nil
}

// shuffled is what a partition's shuffled map sent, by reducer.
type shuffled struct {
	mapper model.NodeID
	counts []ShuffleCount
}

// mapShuffled is MapPartition for a partition with a shuffle spec (the
// three steps at the top of this file): an owner partition routes its
// references and emits its history and cut points; an extent partition
// is joined with its references and routes its extents, emitting the
// dangling references; both emit, last, a record of what they sent. An
// egroup partition emits its egroups and the reduce of their extents.
func mapShuffled(ctx context.Context, kv PageScanner, p Partition, env ShuffleEnv, emit func(MapRecord) error) (int, error) {
	if err := p.Check(); err != nil {
		return 0, err
	}
	if p.Shuffle == nil {
		return MapPartition(ctx, kv, p, emit)
	}
	plain := p
	plain.Shuffle = nil
	switch m, _ := ParsePartition(p.Name); m {
	case "extents":
		return reduceExtents(ctx, kv, p, plain, env, emit)
	case "egroups":
		return reduceEgroups(ctx, kv, p, plain, env, emit)
	}
	ps := newPushers(ctx, p, env)
	read, err := MapPartition(ctx, kv, plain, func(r MapRecord) error {
		o := r.Owner
		if len(o.Extents) > 0 {
			seq, err := shuffleSeq(p.Name, r.ID)
			if err != nil {
				return err
			}
			for _, id := range o.Extents {
				d := ps.to(id)
				d.refs = append(d.refs, ShuffleRef{ID: id, Seq: seq, Bucket: d.bucket(o.Bucket)})
				if err := ps.full(d); err != nil {
					return err
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
	sent, err := ps.finish()
	if err != nil {
		return read, err
	}
	return read, emit(MapRecord{shuffled: sent})
}

// reduceExtents is step 2: it maps the extent partition, joins each
// extent with the references the store received for it, and routes it
// with one reference per distinct bucket (the first in scan order among
// those with a bucket keeps its position; the others, and upload parts',
// come after every position) to its egroup's reducer; a referenced ID
// without an extent record is emitted as a reference (dangling).
func reduceExtents(ctx context.Context, kv PageScanner, p, plain Partition, env ShuffleEnv, emit func(MapRecord) error) (int, error) {
	t, err := env.Store.take(p.Shuffle.ID, p, p.Shuffle.Expect)
	if err != nil {
		return 0, err
	}
	defer t.free()
	refs := t.refs
	ps := newPushers(ctx, p, env)
	j := 0
	var seen []uint32
	// unresolved emits the referenced IDs below id (all: last) that
	// have no extent.
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
	read, err := mapPartitionReused(ctx, kv, plain, func(r MapRecord) error {
		if err := unresolved(r.ID, false); err != nil {
			return err
		}
		x := r.Extent
		d := ps.to(x.Egroup)
		first := -1
		seen = seen[:0]
		for ; j < len(refs) && refs[j].ID == r.ID; j++ {
			if refs[j].Bucket != 0 && first < 0 {
				first = j
			}
			if !slices.Contains(seen, refs[j].Bucket) {
				seen = append(seen, refs[j].Bucket)
			}
		}
		for _, b := range seen {
			seq := uint32(math.MaxUint32)
			if first >= 0 && b == refs[first].Bucket {
				seq = refs[first].Seq
			}
			name := ""
			if b > 0 {
				name = t.names[b-1]
			}
			d.refs = append(d.refs, ShuffleRef{ID: r.ID, Seq: seq, Bucket: d.bucket(name)})
		}
		d.xs = append(d.xs, ShuffleExtent{ID: r.ID, Rev: r.Rev, Egroup: x.Egroup, Off: x.Off, Len: x.Len, Stored: x.StoredLen(),
			Ctime: x.Ctime, FP: x.FP, Live: len(seen) > 0})
		return ps.full(d)
	})
	if err != nil {
		return read, err
	}
	if err := unresolved(0, true); err != nil {
		return read, err
	}
	sent, err := ps.finish()
	if err != nil {
		return read, err
	}
	return read, emit(MapRecord{shuffled: sent})
}

// egroupAgg is step 3's reduce of one egroup's extents: what the
// master's view of the egroup takes from a full scan, and the buckets
// whose policies it folds (1 + index into the stream's names; 0: upload
// parts).
type egroupAgg struct {
	egroup             uint64
	liveN, deadN       int64
	liveBytes, tailEnd int64
	firstSeq           uint32 // math.MaxUint32: no reference with a bucket
	firstBucket        uint32
	buckets            []uint32
	listed             bool
	names              []string // what buckets index (worker side)
}

// reduceEgroups is step 3: it maps the egroup partition (emitting its
// egroups as every scan does), then reduces the extents the store
// received for it by egroup and emits, per egroup with extents, the
// aggregate, and the extents the master acts on (see the top of this
// file), each with whether it is live.
func reduceEgroups(ctx context.Context, kv PageScanner, p, plain Partition, env ShuffleEnv, emit func(MapRecord) error) (int, error) {
	t, err := env.Store.take(p.Shuffle.ID, p, p.Shuffle.Expect)
	if err != nil {
		return 0, err
	}
	defer t.free()
	// The partition's egroups: which exist, and what makes one listed.
	type known struct {
		id          uint64
		size        int64
		transformed bool // a codec or an erasure code
		// allBad: every replica is marked bad; recovery relocates its
		// live extents (decide.Recovery), which needs their list.
		allBad bool
	}
	var egs []known
	// emit copies what it keeps (the compact writer, the master's
	// interner).
	read, err := mapPartitionReused(ctx, kv, plain, func(r MapRecord) error {
		eg := r.Egroup
		allBad := len(eg.Replicas) > 0
		for _, rp := range eg.Replicas {
			allBad = allBad && rp.Bad
		}
		egs = append(egs, known{id: r.ID, size: eg.Size, transformed: eg.Codec != "" || eg.EC != nil, allBad: allBad})
		return emit(r)
	})
	if err != nil {
		return read, err
	}
	withPolicy := make(map[string]bool, len(p.Shuffle.PolicyBuckets))
	for _, n := range p.Shuffle.PolicyBuckets {
		withPolicy[n] = true
	}
	policy := make([]bool, len(t.names)+1)
	for i, n := range t.names {
		policy[i+1] = withPolicy[n]
	}
	xs, refs := t.xs, t.refs
	slices.SortFunc(xs, func(a, b extentRec) int {
		if c := cmp.Compare(a.egroup, b.egroup); c != 0 {
			return c
		}
		if c := cmp.Compare(a.off, b.off); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	refsOf := func(id uint64) []ShuffleRef {
		i, _ := slices.BinarySearchFunc(refs, id, func(r ShuffleRef, id uint64) int { return cmp.Compare(r.ID, id) })
		j := i
		for j < len(refs) && refs[j].ID == id {
			j++
		}
		return refs[i:j]
	}
	var ship []int // indexes into xs of the extents to send, by ID
	for lo := 0; lo < len(xs); {
		hi := lo
		for hi < len(xs) && xs[hi].egroup == xs[lo].egroup {
			hi++
		}
		g := egroupAgg{egroup: xs[lo].egroup, firstSeq: math.MaxUint32, names: t.names}
		lastLiveOff := int64(-1)
		for k := lo; k < hi; k++ {
			x := &xs[k]
			if !x.live {
				g.deadN++
				if x.ctime <= p.Shuffle.GarbageBefore {
					continue // removed first: not in the tail
				}
			} else {
				g.liveN++
				// Live bytes count a location several extents share once
				// (the extents are in offset order).
				if x.off != lastLiveOff {
					g.liveBytes += encodedLen(x.stored)
					lastLiveOff = x.off
				}
				for _, r := range refsOf(x.id) {
					if r.Bucket != 0 && r.Seq < g.firstSeq {
						g.firstSeq, g.firstBucket = r.Seq, r.Bucket
					}
					if !slices.Contains(g.buckets, r.Bucket) {
						g.buckets = append(g.buckets, r.Bucket)
					}
				}
			}
			g.tailEnd = max(g.tailEnd, x.off+encodedLen(x.stored))
		}
		i, ok := slices.BinarySearchFunc(egs, g.egroup, func(k known, id uint64) int { return cmp.Compare(k.id, id) })
		if ok {
			e := egs[i]
			g.listed = p.Shuffle.ListAll || e.transformed || e.allBad || g.deadN > 0 || g.liveBytes < e.size || slices.ContainsFunc(g.buckets, func(b uint32) bool { return policy[b] })
		}
		for k := lo; k < hi; k++ {
			x := &xs[k]
			garbage := !x.live && x.ctime <= p.Shuffle.GarbageBefore
			if garbage || x.live && (g.listed || !ok || x.fp != 0) {
				ship = append(ship, k)
			}
		}
		if err := emit(MapRecord{ID: g.egroup, agg: &g}); err != nil {
			return read, err
		}
		lo = hi
	}
	slices.SortFunc(ship, func(a, b int) int { return cmp.Compare(xs[a].id, xs[b].id) })
	for _, k := range ship {
		x := xs[k]
		var fp []byte
		if x.fp != 0 {
			fp = t.fps[x.fp-1]
		}
		x.fp = 0
		if err := emit(MapRecord{ID: x.id, Rev: x.modRev, isExtent: true, compactExtent: x, compactFP: fp}); err != nil {
			return read, err
		}
	}
	// The end frame names the reducer: a node that ignored the shuffle
	// (a version without one) sends egroups without aggregates, which
	// must not pass for egroups without extents.
	return read, emit(MapRecord{shuffled: &shuffled{mapper: env.Self}})
}
