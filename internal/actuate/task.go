package actuate

import (
	"fmt"
	"strings"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// Kind names what a task does.
type Kind string

// Task kinds. The replica moves share one executor; the names say why.
const (
	KindRecover        Kind = "recover"         // restore the vector after a failure or a bad replica
	KindRemoveReplicas Kind = "remove-replicas" // drop surplus replicas
	KindTierDown       Kind = "tier-down"       // cold data to a slower tier (Curator f/d/h)
	KindTierUp         Kind = "tier-up"         // hot data to a faster tier
	KindBalance        Kind = "balance"         // even out devices of one tier
	KindPlanned        Kind = "planned"         // a move the planner's rules asked for
	KindSeal           Kind = "seal"            // seal an open egroup whose writer is gone
	KindRemoveEgroup   Kind = "remove-egroup"   // data removal stage 2
	KindCompact        Kind = "compact"         // GC: live extents out of a mostly-dead egroup
	// Transformations (transform.go, docs/design/0010).
	KindTruncate   Kind = "truncate"       // GC: cut an egroup's unreferenced tail
	KindCompress   Kind = "compress"       // rewrite cold egroups' extents compressed, packed
	KindDecompress Kind = "decompress"     // rewrite a compressed egroup plain
	KindECEncode   Kind = "ec-encode"      // rewrite cold egroups as K+M strips, packed
	KindECDecode   Kind = "ec-decode"      // rewrite an erasure-coded egroup as replicas
	KindRebuild    Kind = "rebuild-strips" // reconstruct lost strips onto new devices
	KindDedup      Kind = "dedup"          // make duplicate extents share one copy
)

// IsMove reports whether a kind changes an egroup's replica set (copy,
// switch, delete).
func (k Kind) IsMove() bool {
	switch k {
	case KindRecover, KindRemoveReplicas, KindTierDown, KindTierUp, KindBalance, KindPlanned:
		return true
	}
	return false
}

// Task is one unit of background work on one egroup.
type Task struct {
	Kind   Kind   `json:"kind"`
	Egroup uint64 `json:"egroup"`
	// ModRev is the egroup record's revision the decision saw; the task
	// applies only if the record is still at it.
	ModRev int64 `json:"rev"`
	// Bytes is the egroup's size (moves) or the live bytes to relocate
	// (compaction).
	Bytes  int64           `json:"bytes"`
	Add    []model.Replica `json:"add,omitempty"`
	Remove []model.Replica `json:"remove,omitempty"`
	// Extents and Vector are compaction's live extents and the egroup's
	// vector.
	Extents []object.ExtentMove `json:"extents,omitempty"`
	Vector  model.Vector        `json:"vector,omitzero"`
	// Reason says why, for history and operators: the threshold that
	// fired, or the planner rules whose cost the move lowers.
	Reason string `json:"reason,omitempty"`
	// Rules and the cost before and after, for planned moves.
	Rules      []string `json:"rules,omitempty"`
	CostBefore float64  `json:"cost_before,omitempty"`
	CostAfter  float64  `json:"cost_after,omitempty"`
	// Pack lists a compression's source egroups with the revisions the
	// decision saw (the first is Egroup); Codec is the codec to compress
	// with and MaxRatio the ratio above which it does not pay.
	Pack     []decide.EgroupRev `json:"pack,omitempty"`
	Codec    string             `json:"codec,omitempty"`
	MaxRatio float64            `json:"max_ratio,omitempty"`
	// EC is the erasure code an ec-encode writes ("K+M").
	EC string `json:"ec,omitempty"`
	// Canon and Dups are a dedup's canonical extent and its duplicates,
	// with the record revisions the decision saw.
	Canon *object.ExtentRev  `json:"canon,omitempty"`
	Dups  []object.ExtentRev `json:"dups,omitempty"`
	// Sources are the live extents of each source egroup of a compression
	// or decompression, from the scan. They are not checkpointed (a pack
	// can list thousands): a resumed transform without them is dropped as
	// stale, and the next scan plans it again from fresh metadata.
	Sources []object.RewriteSource `json:"-"`
}

func (t Task) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s egroup=%016x rev=%d", t.Kind, t.Egroup, t.ModRev)
	if len(t.Add) > 0 {
		fmt.Fprintf(&b, " add=%v", devices(t.Add))
	}
	if len(t.Remove) > 0 {
		fmt.Fprintf(&b, " remove=%v", devices(t.Remove))
	}
	if len(t.Extents) > 0 {
		fmt.Fprintf(&b, " extents=%d", len(t.Extents))
	}
	if t.Reason != "" {
		fmt.Fprintf(&b, " (%s)", t.Reason)
	}
	return b.String()
}

func devices(rs []model.Replica) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Device)
	}
	return out
}

// FromDecide converts a Curator decision. Compaction's extents are added
// by the caller (they come from the scan, not the decision).
func FromDecide(t decide.Task) Task {
	at := Task{Kind: Kind(t.Kind), Egroup: t.Egroup, ModRev: t.ModRev, Bytes: t.Bytes,
		Add: t.Add, Remove: t.Remove, Reason: t.Reason, Pack: t.Pack, Codec: t.Codec}
	if t.EC.K > 0 {
		at.EC = t.EC.String()
	}
	if t.Kind == decide.KindDedup {
		at.Canon = &object.ExtentRev{ID: t.Canon, ModRev: t.CanonRev}
		for i, id := range t.Extents {
			at.Dups = append(at.Dups, object.ExtentRev{ID: id, ModRev: t.ExtentRevs[i]})
		}
	}
	return at
}
