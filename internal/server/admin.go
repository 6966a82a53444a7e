package server

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/sse"
)

// AdminHandler serves the admin API (JSON over HTTP) and /metrics. Every
// request must carry an admin's AWS SigV4 signature (service
// "terrace-admin"; internal/adminauth), except the endpoints named in the
// admin_public setting; unsigned requests get 401, wrong ones 403, and
// both are logged.
//
//	GET    /v1/health                          {"status":"ok"} (no other detail)
//	GET    /v1/status                          node, devices, build
//	GET    /debug/pprof/...                    Go profiles (CPU, heap, trace)
//	GET    /v1/tier/report                     per tier and device usage
//	GET    /v1/tier/policy                     tiering thresholds and a dry run of what would move now
//	POST   /v1/tier/recall?bucket=B&prefix=P   bring remote-tier replicas back to local tiers
//	GET    /v1/object/locate?bucket=B&key=K    extents, egroups, replicas
//	POST   /v1/object/set-replication?bucket=B&key=K&vector=V[&wait=1]
//	GET    /v1/placement/explain?vector=V[&policy=P&bytes=N&seed=S]  scores and choice
//	POST   /v1/nodes/ID/drain[?off=1]          start (or stop) draining a node
//	GET    /v1/curator/status                  schedules, running job, last job
//	GET    /v1/curator/history?n=N             recent jobs
//	POST   /v1/curator/run?kind=full|partial[&wait=1]  run a job now
//	GET    /v1/curator/queue[?node=N&n=K]      node task queues: counts, and N's first K tasks
//	GET    /v1/buckets                         list buckets
//	PUT    /v1/buckets/B[?vector=V]            create bucket
//	POST   /v1/buckets/B/vector?vector=V       set the bucket default vector
//	DELETE /v1/buckets/B                       delete an empty bucket
//	PUT    /v1/data/B/K[?vector=V&class=C]     put an object (body)
//	GET    /v1/data/B/K                        get an object
//	DELETE /v1/data/B/K                        delete an object
//	GET    /v1/data/B?prefix=P&delimiter=D&after=A&max=N  list
//	GET    /v1/users, POST /v1/users/NAME, ...  users (users.go)
//	POST   /v1/sse/rewrap                      re-seal with the active master key (rewrap.go)
//	GET    /v1/lifecycle/report, POST /v1/lifecycle/run  S3 lifecycle rules (lifecycle.go)
//	...    /v1/policies..., /v1/object/exec    policies and object classes (policy.go)
//	GET    /v1/curator/jobs[?n=N], /v1/curator/jobs/ID   job progress and tasks (console.go)
//	POST   /v1/egroups/held                    body {"ids":[...]}: those this node's writers may still commit (orphans.go; asked by peers' orphan sweeps)
//	       /console/                           the web console: its own login and session cookie (console.go)
func (n *Node) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(n.Reg, promhttp.HandlerOpts{}))
	// Profiling for operators and docs/perf.md investigations.
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/heap", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /v1/status", n.handleStatus)
	mux.HandleFunc("GET /v1/tier/report", n.handleTierReport)
	mux.HandleFunc("GET /v1/tier/policy", n.handleTierPolicy)
	mux.HandleFunc("POST /v1/tier/recall", n.handleTierRecall)
	mux.HandleFunc("GET /v1/object/locate", n.handleLocate)
	mux.HandleFunc("POST /v1/object/set-replication", n.handleSetReplication)
	mux.HandleFunc("GET /v1/placement/explain", n.handleExplain)
	mux.HandleFunc("POST /v1/nodes/{id}/drain", n.handleDrain)
	mux.HandleFunc("GET /v1/curator/status", n.handleCuratorStatus)
	mux.HandleFunc("GET /v1/curator/history", n.handleCuratorHistory)
	mux.HandleFunc("POST /v1/curator/run", n.handleCuratorRun)
	mux.HandleFunc("GET /v1/curator/queue", n.handleCuratorQueue)
	mux.HandleFunc("GET /v1/buckets", n.handleListBuckets)
	mux.HandleFunc("PUT /v1/buckets/{bucket}", n.handleCreateBucket)
	mux.HandleFunc("POST /v1/buckets/{bucket}/vector", n.handleBucketVector)
	mux.HandleFunc("POST /v1/buckets/{bucket}/transform", n.handleBucketTransform)
	mux.HandleFunc("DELETE /v1/buckets/{bucket}", n.handleDeleteBucket)
	mux.HandleFunc("PUT /v1/data/{bucket}/{key...}", n.handlePut)
	mux.HandleFunc("GET /v1/data/{bucket}/{key...}", n.handleGet)
	mux.HandleFunc("DELETE /v1/data/{bucket}/{key...}", n.handleDelete)
	mux.HandleFunc("GET /v1/data/{bucket}", n.handleList)
	n.userRoutes(mux)                                 // users.go
	n.rewrapRoutes(mux)                               // rewrap.go
	n.lifecycleRoutes(mux)                            // lifecycle.go
	n.planRoutes(mux)                                 // plan.go
	n.policyRoutes(mux)                               // policy.go
	n.mountLog(mux)                                   // zlog.go
	n.jobRoutes(mux)                                  // console.go
	n.orphanRoutes(mux)                               // orphans.go
	n.registerFaultRoutes(mux)                        // fault.go: test hook, refused unless --fault-injection
	open, _ := AdminPublicPaths(n.Config.AdminPublic) // validated at start-up
	v := &adminauth.Verifier{Keys: n.adminKeys, Region: n.Config.Region, Open: open, Log: n.Log}
	return n.withConsole(mux, v.Wrap(mux))
}

// APIError is the admin API's error body.
type APIError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// errStatus maps layer errors to HTTP statuses and stable codes.
func errStatus(err error) (int, string) {
	if st, code, ok := snapshotErrStatus(err); ok {
		return st, code
	}
	switch {
	case errors.Is(err, object.ErrNoSuchBucket):
		return http.StatusNotFound, "NoSuchBucket"
	case errors.Is(err, object.ErrNoSuchKey):
		return http.StatusNotFound, "NoSuchKey"
	case errors.Is(err, object.ErrBucketExists):
		return http.StatusConflict, "BucketAlreadyExists"
	case errors.Is(err, object.ErrBucketNotEmpty):
		return http.StatusConflict, "BucketNotEmpty"
	case errors.Is(err, object.ErrInsufficientStorage):
		return http.StatusInsufficientStorage, "InsufficientStorage"
	case errors.Is(err, model.ErrInvalidVector), errors.Is(err, object.ErrInvalidBucketName),
		errors.Is(err, object.ErrInvalidKey), errors.Is(err, object.ErrUnknownClass),
		errors.Is(err, object.ErrInvalidRange), errors.Is(err, object.ErrTooLarge),
		errors.Is(err, object.ErrIncompleteBody):
		return http.StatusBadRequest, "InvalidArgument"
	case errors.Is(err, context.Canceled):
		return 499, "Canceled"
	}
	return http.StatusInternalServerError, "InternalError"
}

func writeErr(w http.ResponseWriter, err error) {
	st, code := errStatus(err)
	writeJSON(w, st, APIError{Error: err.Error(), Code: code})
}

// Status is the body of GET /v1/status.
type Status struct {
	Node         string         `json:"node"`
	Rack         string         `json:"rack"`
	S3Address    string         `json:"s3_address"`
	AdminAddress string         `json:"admin_address"`
	DataDir      string         `json:"data_dir"`
	Placement    string         `json:"placement"`
	Vector       string         `json:"default_vector"`
	Devices      []device.Stats `json:"devices"`
	Time         time.Time      `json:"time"`
	Cluster      *ClusterStatus `json:"cluster,omitempty"`
}

func (n *Node) handleStatus(w http.ResponseWriter, r *http.Request) {
	st := Status{Node: n.Config.NodeID, Rack: n.Config.Rack, S3Address: n.Config.S3Address,
		AdminAddress: n.Config.AdminAddress, DataDir: n.Config.DataDir,
		Placement: n.Layer.Options().Policy.Name(), Vector: n.Config.DefaultVector, Time: time.Now()}
	for _, d := range n.Devices {
		st.Devices = append(st.Devices, d.Stats())
	}
	st.Cluster = n.clusterStatus(r.Context())
	writeJSON(w, http.StatusOK, st)
}

func (n *Node) handleTierReport(w http.ResponseWriter, r *http.Request) {
	rep, err := n.Layer.Report(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	if tasks, _, err := n.Curator.DryRun(r.Context(), false); err == nil {
		for _, t := range tasks {
			for _, rm := range t.Remove {
				for i := range rep.Tiers {
					if rep.Tiers[i].Tier == rm.Tier && (t.Kind == decide.KindTierDown || t.Kind == decide.KindTierUp || t.Kind == decide.KindBalance) {
						rep.Tiers[i].PendingMoves++
						rep.Tiers[i].PendingBytes += t.Bytes
					}
				}
			}
		}
	}
	writeJSON(w, http.StatusOK, rep)
}

func (n *Node) handleLocate(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	loc, err := n.Layer.Locate(r.Context(), q.Get("bucket"), q.Get("key"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, loc)
}

func (n *Node) handleSetReplication(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v, err := model.ParseVector(q.Get("vector"))
	if err != nil {
		writeErr(w, err)
		return
	}
	done, err := n.Layer.SetReplication(r.Context(), q.Get("bucket"), q.Get("key"), v)
	if err != nil {
		writeErr(w, err)
		return
	}
	if q.Get("wait") != "" {
		if err := <-done; err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"status": "done", "vector": v.String()})
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"status": "scheduled", "vector": v.String()})
}

func (n *Node) handleListBuckets(w http.ResponseWriter, r *http.Request) {
	bs, err := n.Layer.ListBuckets(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	type row struct {
		Name    string    `json:"name"`
		Vector  string    `json:"vector"`
		Created time.Time `json:"created"`
	}
	out := []row{}
	for _, b := range bs {
		out = append(out, row{Name: b.Name, Vector: b.Vector.String(), Created: time.Unix(0, b.Created)})
	}
	writeJSON(w, http.StatusOK, out)
}

func optVector(r *http.Request) (model.Vector, error) {
	s := r.URL.Query().Get("vector")
	if s == "" {
		return model.Vector{}, nil
	}
	return model.ParseVector(s)
}

func (n *Node) handleCreateBucket(w http.ResponseWriter, r *http.Request) {
	v, err := optVector(r)
	if err == nil {
		err = n.Layer.CreateBucket(r.Context(), r.PathValue("bucket"), n.Config.RootUser, v)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"bucket": r.PathValue("bucket")})
}

func (n *Node) handleBucketVector(w http.ResponseWriter, r *http.Request) {
	v, err := optVector(r)
	if err == nil {
		err = n.Layer.SetBucketVector(r.Context(), r.PathValue("bucket"), v)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"bucket": r.PathValue("bucket"), "vector": v.String()})
}

func (n *Node) handleDeleteBucket(w http.ResponseWriter, r *http.Request) {
	if err := n.Layer.DeleteBucket(r.Context(), r.PathValue("bucket")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) handlePut(w http.ResponseWriter, r *http.Request) {
	v, err := optVector(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	opts := object.PutOptions{Size: r.ContentLength, Vector: v, Class: strings.ToUpper(r.URL.Query().Get("class"))}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		opts.Headers = map[string]string{"Content-Type": ct}
	}
	info, err := n.Layer.Put(r.Context(), r.PathValue("bucket"), r.PathValue("key"), r.Body, opts)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"bucket": info.Bucket, "key": info.Key, "size": info.Size, "etag": info.ETag, "vector": info.Vector.String()})
}

func (n *Node) handleGet(w http.ResponseWriter, r *http.Request) {
	info, rc, err := n.Layer.Get(r.Context(), r.PathValue("bucket"), r.PathValue("key"), 0, -1)
	if err != nil {
		writeErr(w, err)
		return
	}
	defer rc.Close()
	if _, encrypted := info.Headers[sse.ObjectHeader]; encrypted {
		// The stored bytes are ciphertext; only the S3 gateway decrypts.
		writeJSON(w, http.StatusConflict, APIError{Error: "the object is encrypted (SSE); read it through S3", Code: "ObjectEncrypted"})
		return
	}
	// Read the first chunk before committing to a status: an object whose
	// every replica fails verification then answers 5xx with the reason,
	// not 200 and an empty, truncated body.
	br := bufio.NewReaderSize(rc, 64<<10)
	if _, err := br.Peek(1); err != nil && !errors.Is(err, io.EOF) {
		writeErr(w, err)
		return
	}
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.Header().Set("ETag", `"`+info.ETag+`"`)
	w.Header().Set("Content-Type", "application/octet-stream")
	if _, err := io.Copy(w, br); err != nil {
		n.Log.Warn("admin get aborted", "bucket", info.Bucket, "key", info.Key, "err", err)
	}
}

func (n *Node) handleDelete(w http.ResponseWriter, r *http.Request) {
	if err := n.Layer.Delete(r.Context(), r.PathValue("bucket"), r.PathValue("key")); err != nil {
		writeErr(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ListEntry is one row of GET /v1/data/B.
type ListEntry struct {
	Key    string    `json:"key"`
	Size   int64     `json:"size"`
	ETag   string    `json:"etag"`
	Vector string    `json:"vector"`
	Mtime  time.Time `json:"mtime"`
}

func (n *Node) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	max, _ := strconv.Atoi(q.Get("max"))
	res, err := n.Layer.List(r.Context(), r.PathValue("bucket"), object.ListOptions{
		Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter"), After: q.Get("after"), MaxKeys: max})
	if err != nil {
		writeErr(w, err)
		return
	}
	out := struct {
		Objects   []ListEntry `json:"objects"`
		Prefixes  []string    `json:"prefixes"`
		Truncated bool        `json:"truncated"`
		Next      string      `json:"next,omitempty"`
	}{Objects: []ListEntry{}, Prefixes: res.CommonPrefixes, Truncated: res.Truncated}
	if res.Truncated {
		out.Next = res.NextAfter
	}
	for _, o := range res.Objects {
		out.Objects = append(out.Objects, ListEntry{Key: o.Key, Size: o.Size, ETag: o.ETag, Vector: o.Vector.String(), Mtime: time.Unix(0, o.Mtime)})
	}
	writeJSON(w, http.StatusOK, out)
}

// ExplainResponse is the body of GET /v1/placement/explain.
type ExplainResponse struct {
	Policy string          `json:"policy"`
	Vector string          `json:"vector"`
	Text   string          `json:"text"`
	Choice []model.Replica `json:"choice"`
	Error  string          `json:"error,omitempty"`
}

func (n *Node) handleExplain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v, err := model.ParseVector(q.Get("vector"))
	if err != nil {
		writeErr(w, err)
		return
	}
	cfg := placement.Config{Name: q.Get("policy")}
	if cfg.Name == "" {
		cfg.Name = n.Config.Placement
	}
	bytes, _ := strconv.ParseInt(q.Get("bytes"), 10, 64)
	if bytes <= 0 {
		bytes = n.Layer.Options().EgroupMaxBytes
	}
	seed, _ := strconv.ParseUint(q.Get("seed"), 10, 64)
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	req := placement.Request{Vector: v, Client: model.NodeID(n.Config.NodeID), Bytes: bytes}
	ex, err := placement.Explain(n.Layer.Snapshot(), req, cfg, rand.New(rand.NewPCG(seed, 0)))
	if err != nil && ex == nil {
		writeErr(w, err)
		return
	}
	resp := ExplainResponse{Policy: cfg.Name, Vector: v.String(), Text: ex.String(), Choice: ex.Choice}
	if ex.Err != nil {
		resp.Error = ex.Err.Error()
	}
	writeJSON(w, http.StatusOK, resp)
}

func (n *Node) handleDrain(w http.ResponseWriter, r *http.Request) {
	on := r.URL.Query().Get("off") == ""
	if err := n.Drain(r.Context(), r.PathValue("id"), on); err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"node": r.PathValue("id"), "draining": on})
}

func (n *Node) handleCuratorStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, n.Curator.Status(r.Context()))
}

func (n *Node) handleCuratorHistory(w http.ResponseWriter, r *http.Request) {
	num, _ := strconv.Atoi(r.URL.Query().Get("n"))
	if num <= 0 {
		num = 20
	}
	h, err := n.Curator.History(r.Context(), num)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h)
}

// QueueList is the body of GET /v1/curator/queue.
type QueueList struct {
	Counts map[model.NodeID]int `json:"counts"`
	Node   model.NodeID         `json:"node,omitempty"`
	Tasks  []actuate.QueuedTask `json:"tasks,omitempty"`
}

func (n *Node) handleCuratorQueue(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	num := 50
	if v := q.Get("n"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > 10000 {
			writeJSON(w, http.StatusBadRequest, APIError{Error: "n must be 1..10000", Code: "InvalidArgument"})
			return
		}
		num = k
	}
	counts, err := n.Curator.Queues().Counts(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	out := QueueList{Counts: counts}
	if node := q.Get("node"); node != "" {
		if strings.ContainsAny(node, "/\x00") {
			writeJSON(w, http.StatusBadRequest, APIError{Error: "bad node ID", Code: "InvalidArgument"})
			return
		}
		out.Node = model.NodeID(node)
		if out.Tasks, err = n.Curator.Queues().List(r.Context(), out.Node, num); err != nil {
			writeErr(w, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (n *Node) handleCuratorRun(w http.ResponseWriter, r *http.Request) {
	kind := r.URL.Query().Get("kind")
	if kind != "full" && kind != "partial" {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "kind must be full or partial", Code: "InvalidArgument"})
		return
	}
	if r.URL.Query().Get("wait") == "" {
		n.Curator.Trigger(kind)
		writeJSON(w, http.StatusAccepted, map[string]string{"status": "triggered", "kind": kind})
		return
	}
	rec, err := n.Curator.RunJob(r.Context(), kind, "operator")
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

// TierPolicy is the body of GET /v1/tier/policy.
type TierPolicy struct {
	Enabled    bool               `json:"enabled"`
	Thresholds decide.TierOptions `json:"thresholds"`
	Tiers      []object.TierUsage `json:"tiers"`
	Moves      []string           `json:"moves"`
	Counts     map[string]int     `json:"counts"`
}

func (n *Node) handleTierPolicy(w http.ResponseWriter, r *http.Request) {
	tasks, _, err := n.Curator.DryRun(r.Context(), false)
	if err != nil {
		writeErr(w, err)
		return
	}
	rep, err := n.Layer.Report(r.Context())
	if err != nil {
		writeErr(w, err)
		return
	}
	pol := TierPolicy{Enabled: n.Curator.Options().Tiering, Thresholds: n.Curator.Options().Tier, Tiers: rep.Tiers, Moves: []string{}, Counts: map[string]int{}}
	for _, t := range tasks {
		pol.Counts[string(t.Kind)]++
		if len(pol.Moves) < 200 {
			pol.Moves = append(pol.Moves, t.String())
		}
	}
	writeJSON(w, http.StatusOK, pol)
}

func (n *Node) handleTierRecall(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	rec, err := n.Curator.Recall(r.Context(), q.Get("bucket"), q.Get("prefix"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}
