package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// The policy path: the registry manager, the hooks it fills, and the
// admin API over them. Kept in this file so the node's wiring
// (server.go) only gains a few lines.

// openPolicies starts the policy manager (loading every stored policy)
// and wraps the configured placement policy with the fitness hook.
func (n *Node) openPolicies(kv meta.KV, base placement.Policy) (placement.Policy, error) {
	n.Policies = policy.NewManager(kv, policy.Options{Node: n.Config.NodeID, Logger: n.Log})
	ctx, cancel := context.WithCancel(context.Background())
	if err := n.Policies.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	n.policyStop = cancel
	n.basePlacement = base
	n.Reg.MustRegister(n.Policies.Collectors()...)
	return n.Policies.Placement(base), nil
}

// withPolicyHooks fills the Curator options the policy hooks steer.
func (n *Node) withPolicyHooks(o curator.Options) curator.Options {
	o.Tuner = n.Policies.Tiering()
	o.Balancer = scanBalancer{n: n}
	o.Self = model.NodeID(n.Config.NodeID)
	// Every node keeps the references shuffled to it as a reducer, within
	// the scan memory budget (then spilled beside the master's arrays).
	budget := o.ScanMemoryBytes
	if budget == 0 {
		budget = 1 << 30
	}
	n.shuffle = curator.NewShuffleStore(o.ScanSpillDir, budget, n.Log.With("component", "curator"))
	// A shuffle its master abandoned (failover, fallback) is dropped by
	// the next push or reduce here, or by this sweep, whichever is first.
	sweepCtx, stopSweep := context.WithCancel(context.Background())
	stopPolicies := n.policyStop
	n.policyStop = func() {
		stopSweep()
		if stopPolicies != nil {
			stopPolicies()
		}
	}
	go func(s *curator.ShuffleStore) {
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-sweepCtx.Done():
				return
			case <-t.C:
				s.Sweep()
			}
		}
	}(n.shuffle)
	if sr := n.Config.Curator.ShuffleReferences; sr == nil || *sr {
		o.Shuffle = n.shuffle
	}
	n.mapWork = newMapWorkMetrics(n.shuffle)
	n.Reg.MustRegister(n.mapWork.collectors()...)
	o.PlannerRuleSource = func(s *model.Snapshot) curator.RuleSource { return n.Policies.PlanRules(s) }
	return o
}

// scanBalancer joins the balancer policy (who scans what) with the peers'
// admin API (reading a partition page there).
type scanBalancer struct{ n *Node }

func (b scanBalancer) AssignPartitions(s *model.Snapshot, self model.NodeID, parts []curator.PartitionLoad) map[string]model.NodeID {
	if a := b.n.Policies.Balancer().AssignPartitions(s, self, parts); a != nil {
		return a
	}
	if b.n.Config.Curator.MasterScansAlone {
		return nil
	}
	return curator.SpreadPartitions(s, parts)
}

// A partition's map on a peer may take long (a big partition streams for
// many seconds) but must keep streaming: mapIdleTimeout without a byte
// from the peer (a partitioned, paused or dying node) gives up on it, and
// the master maps the partition itself. mapPartitionTimeout caps the whole.
const (
	mapIdleTimeout      = 5 * time.Second
	mapPartitionTimeout = 10 * time.Minute
)

var _ curator.ShuffleBalancer = scanBalancer{}

// shufflePushTimeout bounds one chunk's push to a reducer: a reducer
// that does not take 32K references in this long is as good as down (the
// master then joins the references itself).
const shufflePushTimeout = 30 * time.Second

// PushShuffle sends a chunk of shuffled references to node's store
// (curator.ShuffleBalancer).
func (b scanBalancer) PushShuffle(ctx context.Context, node model.NodeID, c curator.ShuffleChunk) error {
	addr, err := b.n.adminAddressOf(node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, shufflePushTimeout)
	defer cancel()
	var body bytes.Buffer
	if err := curator.WriteShuffleChunk(&body, c); err != nil {
		return err
	}
	q := url.Values{"id": {c.ID}, "dst": {c.Dst.Name}, "lo": {strconv.FormatUint(c.Dst.Lo, 10)},
		"hi": {strconv.FormatUint(c.Dst.Hi, 10)}, "src": {c.Src}, "mapper": {string(c.Mapper)}}
	hc, scheme := b.n.peerHTTP()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+"/v1/curator/shuffle?"+q.Encode(), &body)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("server: shuffle push to %s: %s: %s", node, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// shuffleEnv is this node's part in other masters' shuffles.
func (n *Node) shuffleEnv() curator.ShuffleEnv {
	return curator.ShuffleEnv{Self: model.NodeID(n.Config.NodeID), Store: n.shuffle, Push: scanBalancer{n: n}.PushShuffle}
}

// maxShuffleChunkBytes bounds a pushed chunk's body (32K references
// encode to well under 1 MiB; a chunk may hold up to 1M).
const maxShuffleChunkBytes = 64 << 20

// handleCuratorShuffle keeps a chunk of references a master's scan
// shuffled to this node as the reducer of an extent partition.
func (n *Node) handleCuratorShuffle(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lo, err1 := strconv.ParseUint(q.Get("lo"), 10, 64)
	hi, err2 := strconv.ParseUint(q.Get("hi"), 10, 64)
	if err1 != nil || err2 != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "shuffle needs lo and hi, the destination's ID range (decimal)", Code: "InvalidArgument"})
		return
	}
	if n.shuffle == nil {
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: "this node keeps no shuffles", Code: "ServiceUnavailable"})
		return
	}
	dst := curator.Partition{Name: q.Get("dst"), Lo: lo, Hi: hi}
	c, err := curator.ReadShuffleChunk(http.MaxBytesReader(w, r.Body, maxShuffleChunkBytes), q.Get("id"), dst, q.Get("src"), model.NodeID(q.Get("mapper")))
	if err == nil {
		err = n.shuffle.Receive(c)
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (b scanBalancer) MapPartition(ctx context.Context, node model.NodeID, part curator.Partition) (curator.MapOutput, error) {
	out := curator.MapOutput{Part: part.Name}
	read, err := b.MapPartitionTo(ctx, node, part, func(r curator.MapRecord) { out.Records = append(out.Records, r) })
	if err != nil {
		return curator.MapOutput{}, err
	}
	out.Read = read
	return out, nil
}

// MapPartitionTo streams the peer's map output to emit as it arrives
// (curator.StreamingScanBalancer): the master keeps each record in its
// compact form, never a partition of decoded records.
func (b scanBalancer) MapPartitionTo(ctx context.Context, node model.NodeID, part curator.Partition, emit func(curator.MapRecord)) (int, error) {
	addr, err := b.n.adminAddressOf(node)
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, mapPartitionTimeout)
	defer cancel()
	idle := time.AfterFunc(mapIdleTimeout, cancel)
	defer idle.Stop()
	hc, scheme := b.n.peerHTTP()
	q := url.Values{"part": {part.Name}, "lo": {strconv.FormatUint(part.Lo, 10)}, "hi": {strconv.FormatUint(part.Hi, 10)}}
	if part.From != "" {
		q.Set("from", part.From)
	}
	if part.To != "" {
		q.Set("to", part.To)
	}
	if part.Rev > 0 {
		q.Set("rev", strconv.FormatInt(part.Rev, 10))
	}
	if part.Shuffle != nil {
		spec, err := json.Marshal(part.Shuffle)
		if err != nil {
			return 0, err
		}
		q.Set("shuffle", string(spec))
	}
	// Egroups in the form the master keeps: the worker interns their
	// shapes, and nine integers travel per egroup. A worker of a version
	// without the compact form ignores the parameter and sends records,
	// which ReadMapStreamTo reads as well.
	q.Set("form", "compact")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+addr+"/v1/curator/map?"+q.Encode(), nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("server: map %s on %s: %s: %s", part.Name, node, resp.Status, strings.TrimSpace(string(b)))
	}
	read, err := curator.ReadMapStreamTo(&idleReader{r: resp.Body, t: idle, d: mapIdleTimeout}, part, emit)
	if err != nil {
		return 0, fmt.Errorf("server: map %s on %s: %w", part.Name, node, err)
	}
	return read, nil
}

// flushWriter sends every write at once (a map stream's frames and
// heartbeats must not wait in the response buffer).
type flushWriter struct {
	w io.Writer
	f http.Flusher
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	fw.f.Flush()
	return n, err
}

// idleReader restarts its timer on every read that returns data.
type idleReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (i *idleReader) Read(p []byte) (int, error) {
	n, err := i.r.Read(p)
	if n > 0 {
		i.t.Reset(i.d)
	}
	return n, err
}

// peerHTTP returns the client and URL scheme for node-to-node admin calls
// (scan pages, forwarded object exec): signed with the root account's keys
// (every node of a cluster shares them) and, in a TLS cluster, trusting
// the cluster CA with this node's certificate.
func (n *Node) peerHTTP() (*http.Client, string) {
	n.peerOnce.Do(func() {
		base := &http.Transport{MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second}
		n.peerScheme = "http://"
		if n.Config.TLSCert != "" && n.Config.TLSCA != "" {
			if tc, err := n.Config.TLS().PeerClient(); err == nil {
				base.TLSClientConfig = tc
				n.peerScheme = "https://"
			} else {
				n.Log.Error("peer admin TLS", "err", err)
			}
		}
		n.peerClient = &http.Client{Transport: &adminauth.Transport{Base: base, AccessKey: n.Config.RootUser,
			SecretKey: n.Config.RootPassword, Region: n.Config.Region}}
	})
	return n.peerClient, n.peerScheme
}

func (n *Node) adminAddressOf(id model.NodeID) (string, error) {
	if n.cluster == nil {
		return "", fmt.Errorf("server: node %s: not in cluster mode", id)
	}
	info, ok := n.cluster.members.Node(id)
	if !ok || info.AdminAddress == "" {
		return "", fmt.Errorf("server: node %s has no known admin address", id)
	}
	return info.AdminAddress, nil
}

// policyEnv is the live model validation and `policy test` use.
func (n *Node) policyEnv() policy.Env {
	return policy.Env{
		Snapshot:   n.Layer.Snapshot,
		Egroups:    n.Curator.ScanEgroups,
		Partitions: n.Curator.PartitionLoads,
		Placement:  n.basePlacement,
		Store:      n.Layer,
		Self:       model.NodeID(n.Config.NodeID),
	}
}

// policyRoutes registers the policy and object-class endpoints:
//
//	GET    /v1/policies[?all=1]                 live policies and this node's state
//	PUT    /v1/policies/NAME[?hook=K&author=A&comment=C&if_version=V]  body: Lua source
//	GET    /v1/policies/NAME[?version=V]        a record with its source, events
//	GET    /v1/policies/NAME/history            every kept version
//	POST   /v1/policies/NAME/rollback?version=V[&author=A]
//	DELETE /v1/policies/NAME[?author=A&if_version=V]
//	POST   /v1/policies/NAME/test               body: policy.TestRequest (JSON)
//	GET    /v1/policies/swaps[?name=N]          recent swaps on this node
//	GET    /v1/policies/events[?name=N&n=K]     the cluster-wide policy event log
//	POST   /v1/object/exec?bucket=B&key=K&method=CLASS.METHOD  body: the argument
//	GET    /v1/curator/map?part=egroups/3&lo=L&hi=H  one scan partition's map output (for the master;
//	                                                 objects/H, versions/H, uploads/H take from=K&to=K, key bounds,
//	                                                 and rev=R, the master's snapshot revision; shuffle=JSON, the
//	                                                 partition's part in a shuffle: curator.ShuffleSpec)
//	POST   /v1/curator/shuffle?id=S&dst=extents/3&lo=L&hi=H&src=objects/2&mapper=N  body: a chunk of
//	                                                 shuffled references (curator.WriteShuffleChunk) for this node to reduce
func (n *Node) policyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/policies", n.handlePolicyList)
	mux.HandleFunc("GET /v1/policies/swaps", n.handlePolicySwaps)
	mux.HandleFunc("GET /v1/policies/events", n.handlePolicyEvents)
	mux.HandleFunc("PUT /v1/policies/{name}", n.handlePolicyPut)
	mux.HandleFunc("GET /v1/policies/{name}", n.handlePolicyShow)
	mux.HandleFunc("GET /v1/policies/{name}/history", n.handlePolicyHistory)
	mux.HandleFunc("POST /v1/policies/{name}/rollback", n.handlePolicyRollback)
	mux.HandleFunc("DELETE /v1/policies/{name}", n.handlePolicyRemove)
	mux.HandleFunc("POST /v1/policies/{name}/test", n.handlePolicyTest)
	mux.HandleFunc("POST /v1/object/exec", n.handleObjectExec)
	mux.HandleFunc("GET /v1/curator/map", n.handleCuratorMap)
	mux.HandleFunc("POST /v1/curator/shuffle", n.handleCuratorShuffle)
}

// PolicyError is the admin API's error body for policy failures: the Lua
// line and kind when the sandbox reported them.
type PolicyError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
	Kind  string `json:"kind,omitempty"`
	Line  int    `json:"line,omitempty"`
}

func writePolicyErr(w http.ResponseWriter, err error) {
	pe := PolicyError{Error: err.Error()}
	var se *sandbox.Error
	if errors.As(err, &se) {
		pe.Kind, pe.Line = string(se.Kind), se.Line
	}
	st := http.StatusInternalServerError
	switch {
	case errors.Is(err, policy.ErrInvalid):
		st, pe.Code = http.StatusUnprocessableEntity, "PolicyRejected"
	case errors.Is(err, policy.ErrVersionMismatch):
		st, pe.Code = http.StatusConflict, "VersionMismatch"
	case errors.Is(err, policy.ErrHookTaken):
		st, pe.Code = http.StatusConflict, "HookTaken"
	case errors.Is(err, policy.ErrHookMismatch):
		st, pe.Code = http.StatusConflict, "HookMismatch"
	case errors.Is(err, policy.ErrNotFound), errors.Is(err, policy.ErrVersionNotFound):
		st, pe.Code = http.StatusNotFound, "NoSuchPolicy"
	case errors.Is(err, policy.ErrNoSuchClass):
		st, pe.Code = http.StatusNotFound, "NoSuchClass"
	case errors.Is(err, policy.ErrNoSuchMethod):
		st, pe.Code = http.StatusNotFound, "NoSuchMethod"
	case errors.Is(err, policy.ErrContention):
		st, pe.Code = http.StatusConflict, "Contention"
	case errors.Is(err, policy.ErrObjectSize):
		st, pe.Code = http.StatusBadRequest, "ObjectTooLarge"
	case se != nil:
		st, pe.Code = http.StatusUnprocessableEntity, "PolicyError"
	case strings.HasPrefix(err.Error(), "policy: invalid name"), strings.HasPrefix(err.Error(), "policy: unknown hook"),
		strings.HasPrefix(err.Error(), "policy: what-if"):
		st, pe.Code = http.StatusBadRequest, "InvalidArgument"
	default:
		st, pe.Code = errStatus(err)
	}
	writeJSON(w, st, pe)
}

// PolicyEntry is one row of GET /v1/policies: the registry record and
// this node's view of it.
type PolicyEntry struct {
	policy.Record
	Running   int64  `json:"running"`
	Disabled  bool   `json:"disabled,omitempty"`
	Calls     int64  `json:"calls"`
	Errors    int64  `json:"errors"`
	LastError string `json:"last_error,omitempty"`
}

// PolicyList is the body of GET /v1/policies.
type PolicyList struct {
	Node     string        `json:"node"`
	Policies []PolicyEntry `json:"policies"`
}

func (n *Node) handlePolicyList(w http.ResponseWriter, r *http.Request) {
	recs, err := n.Policies.Registry().List(r.Context())
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	status := map[string]policy.Status{}
	for _, st := range n.Policies.Status() {
		status[st.Name] = st
	}
	all := r.URL.Query().Get("all") != ""
	out := PolicyList{Node: n.Config.NodeID, Policies: []PolicyEntry{}}
	for _, rec := range recs {
		if rec.Deleted && !all {
			continue
		}
		e := PolicyEntry{Record: rec.Summary()}
		if st, ok := status[rec.Name]; ok {
			e.Running, e.Disabled, e.Calls, e.Errors, e.LastError = st.Running, st.Disabled, st.Calls, st.Errors, st.LastError
			if st.Version < rec.Version {
				// This node has not swapped in the newest version yet.
				e.Version = st.Version
			}
		}
		out.Policies = append(out.Policies, e)
	}
	writeJSON(w, http.StatusOK, out)
}

func queryInt(r *http.Request, key string, def int64) (int64, error) {
	s := r.URL.Query().Get(key)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("policy: parameter %s=%q is not an integer", key, s)
	}
	return v, nil
}

func (n *Node) handlePolicyPut(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	src, err := io.ReadAll(io.LimitReader(r.Body, sandbox.DefaultMaxSourceBytes+1))
	if err != nil {
		writeErr(w, err)
		return
	}
	ifv, err := queryInt(r, "if_version", -1)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	req := policy.PutRequest{Name: r.PathValue("name"), Source: string(src), Author: q.Get("author"), Comment: q.Get("comment"),
		Hook: policy.Hook(q.Get("hook")), IfVersion: ifv}
	if req.Author == "" {
		req.Author = "admin-api"
	}
	res, err := n.Policies.Put(r.Context(), req, n.policyEnv())
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// PolicyShow is the body of GET /v1/policies/NAME.
type PolicyShow struct {
	Record policy.Record  `json:"record"`
	Node   *policy.Status `json:"node,omitempty"`
	Events []policy.Event `json:"events,omitempty"`
}

func (n *Node) handlePolicyShow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	v, err := queryInt(r, "version", 0)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	var rec policy.Record
	if v > 0 {
		rec, err = n.Policies.Registry().Version(r.Context(), name, v)
	} else {
		rec, _, err = n.Policies.Registry().Get(r.Context(), name)
	}
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	out := PolicyShow{Record: rec}
	for _, st := range n.Policies.Status() {
		if st.Name == name {
			s := st
			out.Node = &s
		}
	}
	out.Events, _ = n.Policies.Registry().Events(r.Context(), name, 10)
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handlePolicyHistory(w http.ResponseWriter, r *http.Request) {
	hist, err := n.Policies.Registry().History(r.Context(), r.PathValue("name"))
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	for i := range hist {
		hist[i] = hist[i].Summary()
	}
	writeJSON(w, http.StatusOK, hist)
}

func (n *Node) handlePolicyRollback(w http.ResponseWriter, r *http.Request) {
	v, err := queryInt(r, "version", 0)
	if err != nil || v <= 0 {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "rollback needs version=N (N >= 1)", Code: "InvalidArgument"})
		return
	}
	author := r.URL.Query().Get("author")
	if author == "" {
		author = "admin-api"
	}
	res, err := n.Policies.Rollback(r.Context(), r.PathValue("name"), v, author, n.policyEnv())
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (n *Node) handlePolicyRemove(w http.ResponseWriter, r *http.Request) {
	ifv, err := queryInt(r, "if_version", -1)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	author := r.URL.Query().Get("author")
	if author == "" {
		author = "admin-api"
	}
	res, err := n.Policies.Remove(r.Context(), r.PathValue("name"), author, ifv)
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxTestRequestBytes bounds a test request (a source plus options).
const maxTestRequestBytes = 2 * sandbox.DefaultMaxSourceBytes

func (n *Node) handlePolicyTest(w http.ResponseWriter, r *http.Request) {
	var req policy.TestRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxTestRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "policy test: bad request body: " + err.Error(), Code: "InvalidArgument"})
		return
	}
	req.Name = r.PathValue("name")
	rep, err := n.Policies.Test(r.Context(), req, n.policyEnv())
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}

// PolicySwaps is the body of GET /v1/policies/swaps.
type PolicySwaps struct {
	Node  string        `json:"node"`
	Swaps []policy.Swap `json:"swaps"`
}

func (n *Node) handlePolicySwaps(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, PolicySwaps{Node: n.Config.NodeID, Swaps: n.Policies.Swaps(r.URL.Query().Get("name"))})
}

func (n *Node) handlePolicyEvents(w http.ResponseWriter, r *http.Request) {
	num, _ := queryInt(r, "n", 50)
	evs, err := n.Policies.Registry().Events(r.Context(), r.URL.Query().Get("name"), int(num))
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	if evs == nil {
		evs = []policy.Event{}
	}
	writeJSON(w, http.StatusOK, evs)
}

// forwardedHeader marks an exec a peer forwarded, so it runs where it
// lands instead of being forwarded again.
const forwardedHeader = "X-Terrace-Forwarded-By"

// maxExecArgBytes bounds an exec argument.
const maxExecArgBytes = 1 << 20

// handleObjectExec runs CLASS.METHOD on one object. It runs on a node
// holding a replica of the object's first extent: a request that lands
// elsewhere is forwarded there once (correctness never depends on it —
// the write is a compare-and-swap — but the read is then local). A new
// object runs where the request landed.
func (n *Node) handleObjectExec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	class, method, ok := strings.Cut(q.Get("method"), ".")
	if !ok || class == "" || method == "" {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "method must be CLASS.METHOD, e.g. counter.incr", Code: "InvalidArgument"})
		return
	}
	arg, err := io.ReadAll(io.LimitReader(r.Body, maxExecArgBytes+1))
	if err != nil {
		writeErr(w, err)
		return
	}
	if len(arg) > maxExecArgBytes {
		writeJSON(w, http.StatusRequestEntityTooLarge, APIError{Error: fmt.Sprintf("argument over %d bytes", maxExecArgBytes), Code: "InvalidArgument"})
		return
	}
	bucket, key := q.Get("bucket"), q.Get("key")
	if r.Header.Get(forwardedHeader) == "" {
		if target := n.replicaHolder(r.Context(), bucket, key); target != "" {
			if n.forwardExec(w, r, target, arg) {
				return
			}
		}
	}
	res, err := n.Policies.Exec(r.Context(), n.Layer, policy.ExecRequest{Bucket: bucket, Key: key, Class: class, Method: method, Arg: string(arg)})
	if err != nil {
		writePolicyErr(w, err)
		return
	}
	res.Node = n.Config.NodeID
	writeJSON(w, http.StatusOK, res)
}

// replicaHolder returns a node holding a replica of the object's first
// extent when this node holds none ("" to run here).
func (n *Node) replicaHolder(ctx context.Context, bucket, key string) model.NodeID {
	if n.cluster == nil {
		return ""
	}
	loc, err := n.Layer.Locate(ctx, bucket, key)
	if err != nil || len(loc.Extents) == 0 {
		return ""
	}
	var other model.NodeID
	for _, rep := range loc.Extents[0].Replicas {
		if rep.Bad {
			continue
		}
		if rep.Node == model.NodeID(n.Config.NodeID) {
			return ""
		}
		if other == "" {
			other = rep.Node
		}
	}
	return other
}

// forwardExec relays an exec to target; false if it could not reach it
// (the caller then runs the method here).
func (n *Node) forwardExec(w http.ResponseWriter, r *http.Request, target model.NodeID, arg []byte) bool {
	addr, err := n.adminAddressOf(target)
	if err != nil {
		return false
	}
	hc, scheme := n.peerHTTP()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, scheme+addr+"/v1/object/exec?"+r.URL.RawQuery, bytes.NewReader(arg))
	if err != nil {
		return false
	}
	req.Header.Set(forwardedHeader, n.Config.NodeID)
	resp, err := hc.Do(req)
	if err != nil {
		n.Log.Warn("object exec: forwarding to the replica holder failed; running here", "node", target, "err", err)
		return false
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return true
}

// handleCuratorMap runs the map stage of one scan partition on this
// node's metadata store for the Curator master and streams the output.
func (n *Node) handleCuratorMap(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	lo, err1 := strconv.ParseUint(q.Get("lo"), 10, 64)
	hi, err2 := strconv.ParseUint(q.Get("hi"), 10, 64)
	part := curator.Partition{Name: q.Get("part"), Lo: lo, Hi: hi, From: q.Get("from"), To: q.Get("to")}
	var err3 error
	if r := q.Get("rev"); r != "" {
		part.Rev, err3 = strconv.ParseInt(r, 10, 64)
	}
	var errShuffle error
	if sp := q.Get("shuffle"); sp != "" {
		part.Shuffle = new(curator.ShuffleSpec)
		if err := json.Unmarshal([]byte(sp), part.Shuffle); err != nil {
			errShuffle = fmt.Errorf("map: shuffle: %v", err)
		}
	}
	err := errShuffle
	if err == nil {
		err = part.Check()
	}
	if err == nil && (err1 != nil || err2 != nil) {
		err = fmt.Errorf("map needs lo and hi, the partition's ID range (decimal)")
	}
	if err == nil && err3 != nil {
		err = fmt.Errorf("map: rev %q is not a revision (decimal)", q.Get("rev"))
	}
	write := curator.WriteMapStream
	switch q.Get("form") {
	case "", "records":
	case "compact":
		write = curator.WriteCompactMapStream
	default:
		if err == nil {
			err = fmt.Errorf("map: form %q: want records or compact", q.Get("form"))
		}
	}
	if err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	w.Header().Set("Content-Type", "application/x-gob")
	start := time.Now()
	done := n.mapWork.start()
	var out io.Writer = w
	if f, ok := w.(http.Flusher); ok {
		out = flushWriter{w, f}
	}
	if part.Shuffle != nil {
		write = func(ctx context.Context, w io.Writer, kv curator.PageScanner, p curator.Partition) error {
			return curator.WriteShuffleMapStream(ctx, w, kv, p, n.shuffleEnv())
		}
	}
	err = write(r.Context(), out, n.KV, part)
	done(err)
	if err != nil {
		// The end frame carries the error to the master; log it here too.
		n.Log.Warn("curator map", "partition", part.Name, "err", err)
		return
	}
	n.Log.Debug("curator map", "partition", part.Name, "took", time.Since(start))
}
