package checker

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/terrace-storage/terrace/internal/chaos/history"
)

// Options tune the check.
type Options struct {
	// KeyTimeout bounds the linearizability search of one key (0: 30 s).
	// A key whose search does not finish is reported undecided.
	KeyTimeout time.Duration
	// MaxFindings bounds each list of findings kept with details (0: 50);
	// counts stay exact.
	MaxFindings int
}

func (o *Options) ensureDefaults() {
	if o.KeyTimeout == 0 {
		o.KeyTimeout = 30 * time.Second
	}
	if o.MaxFindings == 0 {
		o.MaxFindings = 50
	}
}

// Finding is one violation.
type Finding struct {
	Key    string `json:"key"`
	Op     int64  `json:"op,omitempty"` // the operation that shows it
	Detail string `json:"detail"`
}

func (f Finding) String() string {
	if f.Op != 0 {
		return fmt.Sprintf("%s (op #%d): %s", f.Key, f.Op, f.Detail)
	}
	return f.Key + ": " + f.Detail
}

// Findings is a counted list of findings, the details bounded.
type Findings struct {
	Count int       `json:"count"`
	List  []Finding `json:"list,omitempty"`
	max   int
}

func (fs *Findings) add(f Finding) {
	fs.Count++
	if len(fs.List) < fs.max {
		fs.List = append(fs.List, f)
	}
}

// Report is the verdict on a history.
type Report struct {
	Ops         int                                      `json:"operations"`
	ByKind      map[history.Kind]map[history.Outcome]int `json:"by_kind"`
	Keys        int                                      `json:"keys"`
	Lost        Findings                                 `json:"lost"`
	Corrupt     Findings                                 `json:"corrupt"`
	Resurrected Findings                                 `json:"resurrected"`
	// Anomalies are non-linearizable keys and bad listings.
	Anomalies Findings `json:"anomalies"`
	// Undecided keys: the linearizability search ran out of time.
	Undecided []string `json:"undecided,omitempty"`
	// LinearizableKeys is how many keys were checked and found
	// linearizable.
	LinearizableKeys int `json:"linearizable_keys"`

	failing map[string]porcupine.LinearizationInfo
}

// OK reports a clean history.
func (r *Report) OK() bool {
	return r.Lost.Count == 0 && r.Corrupt.Count == 0 && r.Resurrected.Count == 0 && r.Anomalies.Count == 0
}

// regInput is a register operation for porcupine: a write (or a delete,
// which writes the absent value "") or a read.
type regInput struct {
	write bool
	value string // digest written; "" is absent
}

// registerModel is one key of an object store: a register holding the
// digest of the current object, "" when there is none.
var registerModel = porcupine.Model{
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(regInput)
		if in.write {
			return true, in.value
		}
		return output.(string) == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(regInput)
		if in.write {
			if in.value == "" {
				return "delete"
			}
			return "put " + short(in.value)
		}
		if output.(string) == "" {
			return "get -> absent"
		}
		return "get -> " + short(output.(string))
	},
	DescribeState: func(state any) string {
		if state.(string) == "" {
			return "absent"
		}
		return short(state.(string))
	},
}

func short(d string) string {
	if len(d) > 8 {
		return d[:8]
	}
	return d
}

// never is the return time of an operation whose outcome is unknown: it
// may take effect at any point after its invocation.
const never = math.MaxInt64

// keyOps is one key's operations, split by role.
type keyOps struct {
	writes  []history.Op // puts, multiparts and deletes (not failed, not final)
	reads   []history.Op // successful, non-corrupt gets
	finals  []history.Op // final reads (any outcome)
	byValue map[string][]history.Op
}

// Check checks a history.
func Check(ops []history.Op, o Options) *Report {
	o.ensureDefaults()
	r := &Report{Ops: len(ops), ByKind: map[history.Kind]map[history.Outcome]int{},
		failing: map[string]porcupine.LinearizationInfo{}}
	r.Lost.max, r.Corrupt.max, r.Resurrected.max, r.Anomalies.max = o.MaxFindings, o.MaxFindings, o.MaxFindings, o.MaxFindings
	keys := map[string]*keyOps{}
	get := func(k string) *keyOps {
		ko, ok := keys[k]
		if !ok {
			ko = &keyOps{byValue: map[string][]history.Op{}}
			keys[k] = ko
		}
		return ko
	}
	// Every write ever attempted, by digest, to tell another key's data
	// from garbage in a corrupt read.
	anyKey := map[string]string{}
	for _, op := range ops {
		m, ok := r.ByKind[op.Kind]
		if !ok {
			m = map[history.Outcome]int{}
			r.ByKind[op.Kind] = m
		}
		m[op.Outcome]++
		if op.Kind.IsWrite() {
			ko := get(op.Key)
			ko.byValue[op.Digest] = append(ko.byValue[op.Digest], op)
			anyKey[op.Digest] = op.Key
			if op.Outcome != history.Fail {
				ko.writes = append(ko.writes, op)
			}
		}
		if op.Kind == history.Delete {
			if op.Outcome != history.Fail {
				get(op.Key).writes = append(get(op.Key).writes, op)
			}
		}
	}
	for _, op := range ops {
		if op.Kind != history.Get {
			continue
		}
		ko := get(op.Key)
		if op.Final {
			ko.finals = append(ko.finals, op)
		}
		if op.Outcome != history.OK {
			continue
		}
		if op.Found {
			if why := corruptRead(op, ko, anyKey); why != "" {
				r.Corrupt.add(Finding{Key: op.Key, Op: op.ID, Detail: why})
				continue
			}
		}
		ko.reads = append(ko.reads, op)
	}
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	sort.Strings(names)
	r.Keys = len(names)
	for _, k := range names {
		ko := keys[k]
		r.checkFinal(k, ko)
		r.checkLinearizable(k, ko, o.KeyTimeout)
	}
	for _, op := range ops {
		if op.Kind == history.List && op.Outcome == history.OK {
			r.checkList(op, keys)
		}
	}
	return r
}

// corruptRead says why a successful read is corrupt, or "".
func corruptRead(op history.Op, ko *keyOps, anyKey map[string]string) string {
	ws := ko.byValue[op.Digest]
	if len(ws) == 0 {
		if other, ok := anyKey[op.Digest]; ok {
			return fmt.Sprintf("returned the bytes of a write to another key (%s)", other)
		}
		return fmt.Sprintf("returned %d bytes (sha256 %s) that no client wrote", op.Size, short(op.Digest))
	}
	if op.Size != ws[0].Size {
		return fmt.Sprintf("size %d, but the write with these bytes has %d", op.Size, ws[0].Size)
	}
	if op.ETag != "" {
		for _, w := range ws {
			if w.ETag == "" || w.ETag == op.ETag {
				return ""
			}
		}
		return fmt.Sprintf("ETag %s does not match the write with these bytes (%s)", op.ETag, ws[0].ETag)
	}
	return ""
}

func ret(op history.Op) int64 {
	if op.Outcome == history.Unknown {
		return never
	}
	return op.Return
}

func valueOf(op history.Op) string {
	if op.Kind == history.Delete {
		return ""
	}
	return op.Digest
}

// checkFinal compares the last final read with the writes it may show.
func (r *Report) checkFinal(key string, ko *keyOps) {
	var last *history.Op
	var lastErr string
	for i := range ko.finals {
		f := &ko.finals[i]
		if f.Outcome != history.OK {
			lastErr = f.Err
			continue
		}
		if last == nil || f.Call > last.Call {
			last = f
		}
	}
	// The candidates: writes and deletes no acknowledged operation began
	// after (unknown ones never end, so they always remain).
	var cands []history.Op
	anyOK := false
	for _, w := range ko.writes {
		if w.Outcome == history.OK {
			anyOK = true
		}
		superseded := false
		for _, y := range ko.writes {
			if y.Outcome == history.OK && y.Call > ret(w) {
				superseded = true
				break
			}
		}
		if !superseded {
			cands = append(cands, w)
		}
	}
	var ackedPut *history.Op
	for i := range cands {
		if cands[i].Outcome == history.OK && cands[i].Kind.IsWrite() {
			ackedPut = &cands[i]
		}
	}
	if last == nil {
		switch {
		case len(ko.finals) == 0:
		case ackedPut != nil:
			r.Lost.add(Finding{Key: key, Op: ackedPut.ID, Detail: fmt.Sprintf("acknowledged write %d unreadable after healing (%d final reads failed; last: %s)", ackedPut.Write, len(ko.finals), lastErr)})
		default:
			// Nothing acknowledged is lost, but a healed store must answer
			// every read: with the object, or with "no such key".
			r.Anomalies.add(Finding{Key: key, Detail: fmt.Sprintf("unreadable after healing (%d final reads failed; last: %s)", len(ko.finals), lastErr)})
		}
		return
	}
	got := ""
	if last.Found {
		got = last.Digest
		if len(ko.byValue[got]) == 0 {
			return // corrupt, already reported
		}
	}
	if !anyOK && got == "" {
		return // never acknowledged anything, and it is absent: fine
	}
	for _, c := range cands {
		if valueOf(c) == got {
			return
		}
	}
	shown := "absent"
	if got != "" {
		shown = fmt.Sprintf("write %d", ko.byValue[got][0].Write)
	}
	switch {
	case ackedPut != nil:
		r.Lost.add(Finding{Key: key, Op: ackedPut.ID, Detail: fmt.Sprintf("final read shows %s; acknowledged write %d was not superseded", shown, ackedPut.Write)})
	case got != "" && anyOK:
		r.Resurrected.add(Finding{Key: key, Op: last.ID, Detail: fmt.Sprintf("final read shows %s, deleted by an acknowledged delete", shown)})
	default:
		r.Anomalies.add(Finding{Key: key, Op: last.ID, Detail: fmt.Sprintf("final read shows %s, which no possible write left", shown)})
	}
}

// checkLinearizable runs porcupine on one key.
func (r *Report) checkLinearizable(key string, ko *keyOps, timeout time.Duration) {
	observed := map[string]bool{"": true}
	for _, rd := range ko.reads {
		if rd.Found {
			observed[rd.Digest] = true
		}
	}
	var hist []porcupine.Operation
	for _, w := range ko.writes {
		v := valueOf(w)
		// An unknown write nobody read may as well never have happened
		// (it can be linearized after every read): leaving it out keeps
		// the search small and changes no verdict.
		if w.Outcome == history.Unknown && !observed[v] {
			continue
		}
		hist = append(hist, porcupine.Operation{ClientId: w.Client, Input: regInput{write: true, value: v},
			Call: w.Call, Return: ret(w), Output: "", Metadata: w.ID})
	}
	for _, rd := range ko.reads {
		out := ""
		if rd.Found {
			out = rd.Digest
		}
		hist = append(hist, porcupine.Operation{ClientId: rd.Client, Input: regInput{}, Call: rd.Call, Return: rd.Return,
			Output: out, Metadata: rd.ID})
	}
	if len(hist) == 0 {
		return
	}
	res, info := porcupine.CheckOperationsVerbose(registerModel, hist, timeout)
	switch res {
	case porcupine.Ok:
		r.LinearizableKeys++
	case porcupine.Illegal:
		r.Anomalies.add(Finding{Key: key, Detail: fmt.Sprintf("not linearizable (%d operations); see the visualization", len(hist))})
		if len(r.failing) < r.Anomalies.max {
			r.failing[key] = info
		}
	default:
		r.Undecided = append(r.Undecided, key)
	}
}

// checkList checks one listing against the writes.
func (r *Report) checkList(op history.Op, keys map[string]*keyOps) {
	bad := func(format string, args ...any) {
		r.Anomalies.add(Finding{Key: "list " + op.Prefix, Op: op.ID, Detail: fmt.Sprintf(format, args...)})
	}
	listed := map[string]bool{}
	for i, e := range op.Entries {
		if i > 0 && op.Entries[i-1].Key >= e.Key {
			bad("entries out of order or repeated: %q then %q", op.Entries[i-1].Key, e.Key)
		}
		if !strings.HasPrefix(e.Key, op.Prefix) {
			bad("entry %q outside the prefix", e.Key)
		}
		listed[e.Key] = true
		ko, ok := keys[e.Key]
		match := false
		if ok {
			for _, w := range ko.writes {
				if w.Kind.IsWrite() && w.Call <= op.Return && w.Size == e.Size && (e.ETag == "" || w.ETag == "" || w.ETag == e.ETag) {
					match = true
					break
				}
			}
		}
		if !match {
			bad("entry %q (size %d, ETag %s) matches no write begun before the listing ended", e.Key, e.Size, e.ETag)
		}
	}
	for k, ko := range keys {
		if !strings.HasPrefix(k, op.Prefix) || listed[k] {
			continue
		}
		existed := false
		for _, w := range ko.writes {
			if w.Kind.IsWrite() && w.Outcome == history.OK && w.Return < op.Call {
				existed = true
			}
		}
		if !existed {
			continue
		}
		for _, w := range ko.writes {
			if w.Kind == history.Delete && w.Call <= op.Return {
				existed = false
			}
		}
		if existed {
			bad("missing %q, which existed throughout the listing", k)
		}
	}
}

// Visualize writes porcupine's HTML rendering of each non-linearizable
// key into dir and returns the file names.
func (r *Report) Visualize(dir string) ([]string, error) {
	var out []string
	keys := make([]string, 0, len(r.failing))
	for k := range r.failing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		name := filepath.Join(dir, fmt.Sprintf("nonlinearizable-%02d.html", i))
		if err := os.WriteFile(name+".key", []byte(k+"\n"), 0o644); err != nil {
			return out, err
		}
		if err := porcupine.VisualizePath(registerModel, r.failing[k], name); err != nil {
			return out, err
		}
		out = append(out, name)
	}
	return out, nil
}
