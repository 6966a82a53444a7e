package server

import (
	"net/http"
	"time"

	"github.com/terrace-storage/terrace/internal/lifecycle"
)

// LifecycleConfig tunes the S3 lifecycle runner.
type LifecycleConfig struct {
	Disabled bool `yaml:"disabled"`
	// Interval between runs (default 1h).
	Interval time.Duration `yaml:"interval"`
	// Day is the length of a lifecycle day (default 24h). Shorten it only
	// on demo and test nodes: with 10s, a 30-day rule acts after 5 minutes.
	Day time.Duration `yaml:"day"`
}

// openLifecycle builds the lifecycle runner; it runs where the Curator
// leads (every node in a single-node setup).
func (n *Node) openLifecycle() {
	opts := lifecycle.Options{Interval: n.Config.Lifecycle.Interval, Day: n.Config.Lifecycle.Day,
		Logger: n.Log.With("component", "lifecycle")}
	if n.elector != nil {
		opts.Leader = n.elector
	}
	n.Lifecycle = lifecycle.New(n.Layer, opts)
	n.Reg.MustRegister(n.Lifecycle.Collectors()...)
}

// lifecycleRoutes mounts:
//
//	GET  /v1/lifecycle/report   what a run would do now and what waits, by bucket and rule (dry run)
//	POST /v1/lifecycle/run      run the rules now and report what was done
func (n *Node) lifecycleRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/lifecycle/report", func(w http.ResponseWriter, r *http.Request) {
		rep, err := n.Lifecycle.Pending(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
	mux.HandleFunc("POST /v1/lifecycle/run", func(w http.ResponseWriter, r *http.Request) {
		rep, err := n.Lifecycle.RunOnce(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		writeJSON(w, http.StatusOK, rep)
	})
}
