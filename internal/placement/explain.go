package placement

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"text/tabwriter"

	"github.com/terrace-storage/terrace/internal/model"
)

// Explanation is what a policy saw and decided for one request: for every
// replica slot, each candidate device with its scores and why it was or
// was not taken. It is produced by running the real policy with a tracer,
// so it cannot drift from what Place does for the same seed.
type Explanation struct {
	Policy  string
	Request Request
	Slots   []ExplainSlot
	// Choice is the placement (nil when Err is set).
	Choice []model.Replica
	// Err is the placement error, if any.
	Err error
}

// ExplainSlot is one replica's decision.
type ExplainSlot struct {
	// Tier is the slot's tier in the vector (model.TierAny: the policy
	// picked it).
	Tier model.Tier
	// Columns name Candidate.Scores (e.g. t_u, t_q, f_mult; or f_db, f_lb,
	// f_ft, f_tm, score). Empty for policies that do not score.
	Columns    []string
	Candidates []Candidate
	// Chosen is the device that took the replica ("" if none).
	Chosen model.DeviceID
}

// Candidate is one device considered for a slot.
type Candidate struct {
	Device  model.DeviceID
	Node    model.NodeID
	Rack    string
	Tier    model.Tier
	Usage   float64
	Queue   int
	Streams int
	Scores  []float64
	// Sampled is true when a sampling policy drew this device.
	Sampled bool
	// Note is "chosen", or the constraint that made the device unsuitable
	// ("space", "distinct nodes", ...), or "" for a suitable device that
	// was not chosen.
	Note string
}

// tracer records a decision for Explain. A nil *tracer records nothing;
// policies guard every call with tr != nil so the hot path pays nothing.
type tracer struct {
	slots []ExplainSlot
	index map[int]int // device index -> candidate position in current slot
	s     *model.Snapshot
}

func (tr *tracer) beginSlot(st *state, t model.Tier, pools [][]int, cols []string, score func(int) []float64) {
	tr.s = st.s
	slot := ExplainSlot{Tier: t, Columns: cols}
	tr.index = map[int]int{}
	for _, pool := range pools {
		for _, i := range pool {
			if _, dup := tr.index[i]; dup {
				continue
			}
			d := &st.s.Devices[i]
			c := Candidate{Device: d.ID, Node: d.Node, Rack: d.Rack, Tier: d.Tier, Usage: d.Usage(), Queue: d.QueueLen, Streams: d.ActiveStreams}
			if ok, why := st.suitable(i, t); !ok {
				c.Note = why
			}
			if score != nil && len(cols) > 0 {
				c.Scores = score(i)
			}
			tr.index[i] = len(slot.Candidates)
			slot.Candidates = append(slot.Candidates, c)
		}
	}
	tr.slots = append(tr.slots, slot)
}

func (tr *tracer) sampled(i int) {
	if k, ok := tr.index[i]; ok {
		tr.slots[len(tr.slots)-1].Candidates[k].Sampled = true
	}
}

// prunedWhere notes, on suitable candidates of the current slot, the
// preference that set them aside (why returns "" for none).
func (tr *tracer) prunedWhere(why func(i int) string) {
	slot := &tr.slots[len(tr.slots)-1]
	for i, k := range tr.index {
		if c := &slot.Candidates[k]; c.Note == "" {
			c.Note = why(i)
		}
	}
}

func (tr *tracer) choose(i int) {
	slot := &tr.slots[len(tr.slots)-1]
	slot.Chosen = tr.s.Devices[i].ID
	if k, ok := tr.index[i]; ok {
		slot.Candidates[k].Note = "chosen"
	}
}

// Explain runs the policy cfg names on the request with a tracer and
// returns every slot's candidates, scores and choice. A placement failure
// is reported in Explanation.Err (the slots up to the failure are still
// there); the returned error is for a bad config only.
func Explain(s *model.Snapshot, req Request, cfg Config, rng *rand.Rand) (*Explanation, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	e, err := ExplainPolicy(s, req, p, rng)
	if e != nil {
		cfg.EnsureDefaults()
		e.Policy = cfg.String()
	}
	return e, err
}

// ExplainPolicy is Explain for an already-built policy.
func ExplainPolicy(s *model.Snapshot, req Request, p Policy, rng *rand.Rand) (*Explanation, error) {
	tp, ok := p.(tracedPolicy)
	if !ok {
		return nil, fmt.Errorf("placement: policy %s cannot be explained", p.Name())
	}
	name := p.Name()
	if st, ok := p.(fmt.Stringer); ok {
		name = st.String()
	}
	tr := &tracer{}
	e := &Explanation{Policy: name, Request: req}
	e.Choice, e.Err = tp.placeTraced(s, req, rng, tr)
	e.Slots = tr.slots
	if e.Err != nil && !errors.Is(e.Err, ErrNoSuitableDevices) {
		return nil, e.Err
	}
	return e, nil
}

// String renders the explanation as aligned tables, one per slot.
func (e *Explanation) String() string {
	var b strings.Builder
	e.Format(&b)
	return b.String()
}

// Format writes the explanation as aligned tables, one per slot.
func (e *Explanation) Format(w io.Writer) {
	fmt.Fprintf(w, "policy: %s\n", e.Policy)
	fmt.Fprintf(w, "request: vector=%s client=%s bytes=%d", e.Request.Vector, orDash(string(e.Request.Client)), e.Request.Bytes)
	if len(e.Request.Existing) > 0 {
		fmt.Fprintf(w, " existing=%s", replicaList(e.Request.Existing))
	}
	if len(e.Request.Exclude) > 0 {
		ids := make([]string, len(e.Request.Exclude))
		for i, id := range e.Request.Exclude {
			ids[i] = string(id)
		}
		fmt.Fprintf(w, " exclude=%s", strings.Join(ids, ","))
	}
	fmt.Fprintln(w)
	for k, slot := range e.Slots {
		fmt.Fprintf(w, "replica %d (tier %s):\n", k+1, slot.Tier)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprint(tw, "  device\tnode\track\ttier\tusage\tqueue\tstreams")
		for _, c := range slot.Columns {
			fmt.Fprintf(tw, "\t%s", c)
		}
		fmt.Fprint(tw, "\tnote\n")
		for _, c := range slot.Candidates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%.1f%%\t%d\t%d", c.Device, c.Node, orDash(c.Rack), c.Tier, 100*c.Usage, c.Queue, c.Streams)
			for j := range slot.Columns {
				if j < len(c.Scores) {
					fmt.Fprintf(tw, "\t%.4g", c.Scores[j])
				} else {
					fmt.Fprint(tw, "\t-")
				}
			}
			note := c.Note
			if c.Sampled && note != "chosen" {
				if note == "" {
					note = "sampled"
				} else {
					note = "sampled, " + note
				}
			}
			fmt.Fprintf(tw, "\t%s\n", orDash(note))
		}
		tw.Flush()
	}
	if e.Err != nil {
		fmt.Fprintf(w, "error: %v\n", e.Err)
		return
	}
	fmt.Fprintf(w, "choice: %s\n", replicaList(e.Choice))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func replicaList(rs []model.Replica) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s(%s)", r.Device, r.Tier)
	}
	return strings.Join(parts, " ")
}
