package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
)

// The periodic orphan sweep (object.Layer.SweepOrphans): every
// orphan_sweep_every each node removes the replica files on its devices
// that no egroup record lists there. In a cluster it first asks the other
// nodes which of the files without a record belong to egroups their
// writers may still commit (POST /v1/egroups/held).

// startOrphanSweep runs the sweep until ctx ends or the layer closes.
func (n *Node) startOrphanSweep(ctx context.Context) {
	every := n.Config.OrphanSweepEvery
	if every <= 0 {
		n.Log.Info("orphan sweep disabled (orphan_sweep_every is negative)")
		return
	}
	n.Layer.StartOrphanSweep(ctx, n.Local, every)
}

// orphanHoldTimeout bounds one peer's answer to the sweep's question.
const orphanHoldTimeout = 30 * time.Second

// heldEgroups is the body of POST /v1/egroups/held, question and answer.
type heldEgroups struct {
	IDs []uint64 `json:"ids"`
}

// orphanHolds is object.Options.OrphanHolds in a cluster: it asks every
// other node that is up which of ids its writers created and may still
// commit. A node that is up but does not answer (unreachable, or of a
// version without the endpoint) fails the question, and the sweep keeps
// every file without a record until the next pass. A node that is down is
// not asked: its writers stopped with it, or, paused or cut off from the
// metadata store, they cannot commit until it is back (see
// docs/cluster.md for what remains).
func (n *Node) orphanHolds(ctx context.Context, ids []uint64) ([]uint64, error) {
	if n.cluster == nil || len(ids) == 0 {
		return nil, nil
	}
	self := model.NodeID(n.Config.NodeID)
	var held []uint64
	for _, v := range n.cluster.members.Nodes() {
		if v.ID == self || !v.Up {
			continue
		}
		h, err := n.askHeld(ctx, v.ID, v.AdminAddress, ids)
		if err != nil {
			return nil, fmt.Errorf("server: ask node %s for held egroups: %w", v.ID, err)
		}
		held = append(held, h...)
	}
	return held, nil
}

// orphanHoldsFor is object.Options.OrphanHolds for cfg: nil on a single
// node, whose writers are all local.
func (n *Node) orphanHoldsFor(cfg Config) func(context.Context, []uint64) ([]uint64, error) {
	if !cfg.Clustered() {
		return nil
	}
	return n.orphanHolds
}

func (n *Node) askHeld(ctx context.Context, node model.NodeID, addr string, ids []uint64) ([]uint64, error) {
	if addr == "" {
		return nil, fmt.Errorf("node %s has no known admin address", node)
	}
	ctx, cancel := context.WithTimeout(ctx, orphanHoldTimeout)
	defer cancel()
	body, err := json.Marshal(heldEgroups{IDs: ids})
	if err != nil {
		return nil, err
	}
	hc, scheme := n.peerHTTP()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+addr+"/v1/egroups/held", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	var out heldEgroups
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxHeldBytes)).Decode(&out); err != nil {
		return nil, err
	}
	return out.IDs, nil
}

// maxHeldBytes bounds a question's and an answer's body (the sweep asks
// about a few hundred egroups at a time).
const maxHeldBytes = 4 << 20

// orphanRoutes registers POST /v1/egroups/held: body {"ids": [...]},
// answer {"ids": [...]}, the egroups among them that this node's writers
// created and may still commit (object.Layer.HeldEgroups).
func (n *Node) orphanRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/egroups/held", n.handleEgroupsHeld)
}

func (n *Node) handleEgroupsHeld(w http.ResponseWriter, r *http.Request) {
	var q heldEgroups
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxHeldBytes)).Decode(&q); err != nil {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "want {\"ids\": [egroup IDs]}: " + err.Error(), Code: "InvalidArgument"})
		return
	}
	held := n.Layer.HeldEgroups(q.IDs)
	if held == nil {
		held = []uint64{}
	}
	writeJSON(w, http.StatusOK, heldEgroups{IDs: held})
}
