package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/object"
)

// Planner, snapshots, clones and versioning on the admin API (see
// AdminHandler):
//
//	GET    /v1/plan[?what_if=W...]                 the moves the rules want now; nothing moves
//	POST   /v1/plan/apply[?wait=1]                 plan now and run it as a checkpointed job
//	GET    /v1/plan/jobs[?n=N]                     running and recent jobs with progress
//	GET    /v1/plan/explain?bucket=B&key=K         the object's egroups, replicas and planned moves
//	GET    /v1/buckets/B/snapshots                 a bucket's snapshots and clone pins
//	PUT    /v1/buckets/B/snapshots/NAME            take a snapshot (metadata only)
//	DELETE /v1/buckets/B/snapshots/NAME            drop a snapshot
//	POST   /v1/buckets/B/clone?to=NEW[&snapshot=S] a writable clone sharing every extent
//	POST   /v1/buckets/B/reduce                    snapshot tree reduction of a clone now
//	PUT    /v1/buckets/B/versioning?state=S        Enabled or Suspended
//	GET    /v1/buckets/B/usage                     logical, exclusive, shared and history bytes
func (n *Node) planRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/plan", n.handlePlan)
	mux.HandleFunc("POST /v1/plan/apply", n.handlePlanApply)
	mux.HandleFunc("GET /v1/plan/jobs", n.handlePlanJobs)
	mux.HandleFunc("GET /v1/plan/explain", n.handlePlanExplain)
	mux.HandleFunc("GET /v1/buckets/{bucket}/snapshots", n.handleSnapshots)
	mux.HandleFunc("PUT /v1/buckets/{bucket}/snapshots/{name}", n.handleCreateSnapshot)
	mux.HandleFunc("DELETE /v1/buckets/{bucket}/snapshots/{name}", n.handleDeleteSnapshot)
	mux.HandleFunc("POST /v1/buckets/{bucket}/clone", n.handleClone)
	mux.HandleFunc("POST /v1/buckets/{bucket}/reduce", n.handleReduce)
	mux.HandleFunc("PUT /v1/buckets/{bucket}/versioning", n.handleVersioning)
	mux.HandleFunc("GET /v1/buckets/{bucket}/usage", n.handleUsage)
}

func (n *Node) handlePlan(w http.ResponseWriter, r *http.Request) {
	var whatIfs []curator.WhatIf
	for _, s := range r.URL.Query()["what_if"] {
		wi, err := curator.ParseWhatIf(s)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
			return
		}
		whatIfs = append(whatIfs, wi)
	}
	p, err := n.Curator.Plan(r.Context(), "", whatIfs)
	if err != nil {
		writePlanErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// writePlanErr: a bad rule or what-if is the caller's mistake.
func writePlanErr(w http.ResponseWriter, err error) {
	if st, _ := errStatus(err); st == http.StatusInternalServerError {
		writeJSON(w, http.StatusBadRequest, APIError{Error: err.Error(), Code: "InvalidArgument"})
		return
	}
	writeErr(w, err)
}

func (n *Node) handlePlanApply(w http.ResponseWriter, r *http.Request) {
	p, prog, err := n.Curator.ApplyPlan(r.Context(), "", r.URL.Query().Get("wait") == "1")
	if err != nil {
		writePlanErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"plan": p, "job": prog})
}

func (n *Node) handlePlanJobs(w http.ResponseWriter, r *http.Request) {
	num, _ := strconv.Atoi(r.URL.Query().Get("n"))
	if num <= 0 {
		num = 20
	}
	jobs, err := n.Curator.JobProgress(r.Context(), num)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, jobs)
}

// handlePlanExplain shows an object's egroups, where their replicas are
// and what the planner would do with them.
func (n *Node) handlePlanExplain(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	loc, err := n.Layer.Locate(r.Context(), q.Get("bucket"), q.Get("key"))
	if err != nil {
		writeErr(w, err)
		return
	}
	p, err := n.Curator.Plan(r.Context(), "", nil)
	if err != nil {
		writePlanErr(w, err)
		return
	}
	mine := map[string]bool{}
	for _, x := range loc.Extents {
		mine[formatEgroup(x.Egroup)] = true
	}
	var moves []curator.PlanMove
	for _, m := range p.Moves {
		if mine[m.Egroup] {
			moves = append(moves, m)
		}
	}
	var unresolved []string
	for _, u := range p.Unresolved {
		for eg := range mine {
			if containsID(u, eg) {
				unresolved = append(unresolved, u)
			}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"location": loc, "moves": moves, "unresolved": unresolved,
		"rules": p.Rules, "cost_before": p.CostBefore, "cost_after": p.CostAfter})
}

func formatEgroup(id uint64) string { return strconv.FormatUint(id|1<<63, 16)[1:] }

func containsID(s, id string) bool {
	for i := 0; i+len(id) <= len(s); i++ {
		if s[i:i+len(id)] == id {
			return true
		}
	}
	return false
}

func (n *Node) handleSnapshots(w http.ResponseWriter, r *http.Request) {
	s, err := n.Layer.Snapshots(r.Context(), r.PathValue("bucket"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (n *Node) handleCreateSnapshot(w http.ResponseWriter, r *http.Request) {
	s, err := n.Layer.CreateSnapshot(r.Context(), r.PathValue("bucket"), r.PathValue("name"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, s)
}

func (n *Node) handleDeleteSnapshot(w http.ResponseWriter, r *http.Request) {
	if err := n.Layer.DeleteSnapshot(r.Context(), r.PathValue("bucket"), r.PathValue("name")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
}

func (n *Node) handleClone(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pin, err := n.Layer.Clone(r.Context(), r.PathValue("bucket"), q.Get("snapshot"), q.Get("to"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"bucket": q.Get("to"), "source": r.PathValue("bucket"), "revision": pin.Rev})
}

func (n *Node) handleReduce(w http.ResponseWriter, r *http.Request) {
	copied, done, err := n.Layer.ReduceClone(r.Context(), r.PathValue("bucket"), 1<<30)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"copied": copied, "independent": done})
}

func (n *Node) handleVersioning(w http.ResponseWriter, r *http.Request) {
	if err := n.Layer.SetVersioning(r.Context(), r.PathValue("bucket"), r.URL.Query().Get("state")); err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"bucket": r.PathValue("bucket"), "versioning": r.URL.Query().Get("state")})
}

func (n *Node) handleUsage(w http.ResponseWriter, r *http.Request) {
	u, err := n.Layer.BucketUsage(r.Context(), r.PathValue("bucket"))
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, u)
}

// snapshotErrStatus maps the history model's errors.
func snapshotErrStatus(err error) (int, string, bool) {
	switch {
	case errors.Is(err, object.ErrReadOnly):
		return http.StatusForbidden, "ReadOnly", true
	case errors.Is(err, object.ErrNoSuchSnapshot):
		return http.StatusNotFound, "NoSuchSnapshot", true
	case errors.Is(err, object.ErrSnapshotExists):
		return http.StatusConflict, "SnapshotExists", true
	case errors.Is(err, object.ErrInvalidVersioning):
		return http.StatusBadRequest, "InvalidArgument", true
	case errors.Is(err, object.ErrNoSuchVersion):
		return http.StatusNotFound, "NoSuchVersion", true
	case errors.Is(err, object.ErrCloneTooDeep):
		return http.StatusConflict, "CloneTooDeep", true
	}
	return 0, "", false
}
