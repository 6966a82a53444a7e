package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
)

// RewrapReport is the answer of POST /v1/sse/rewrap.
type RewrapReport struct {
	ActiveKey string `json:"active_key"`
	// Users and Objects count the secrets and SSE-S3 data keys re-sealed
	// with the active key; Scanned counts the objects looked at.
	Users   int `json:"users"`
	Objects int `json:"objects"`
	Scanned int `json:"scanned"`
	// History counts the history records re-sealed (noncurrent versions,
	// records snapshots and clones still see); HistoryScanned those
	// looked at.
	History        int `json:"history"`
	HistoryScanned int `json:"history_scanned"`
}

// rewrapRoutes mounts the master-key rotation endpoint:
//
//	POST /v1/sse/rewrap   re-seal user secrets and SSE-S3 data keys with the active master key
func (n *Node) rewrapRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/sse/rewrap", func(w http.ResponseWriter, r *http.Request) {
		rep, err := n.Rewrap(r.Context())
		if err != nil {
			writeErr(w, err)
			return
		}
		n.Log.Info("master key rewrap done", "active_key", rep.ActiveKey, "users", rep.Users, "objects", rep.Objects, "scanned", rep.Scanned,
			"history", rep.History, "history_scanned", rep.HistoryScanned)
		writeJSON(w, http.StatusOK, rep)
	})
}

// Rewrap re-seals, after a master-key rotation, every user secret and
// every SSE-S3 object data key that is not sealed with the active key —
// current records, noncurrent versions and the records snapshots and
// clones still see — so that older keys can then be dropped from the
// keyring. Object bytes are
// not rewritten. Each object is updated with compare-and-swap; an object
// overwritten meanwhile carries a new record already. Multipart uploads
// still in progress keep their old seal: keep the old key until they are
// completed or aborted.
func (n *Node) Rewrap(ctx context.Context) (RewrapReport, error) {
	rep := RewrapReport{ActiveKey: n.Keys.ActiveID()}
	var err error
	if rep.Users, err = n.Users.Rewrap(ctx); err != nil {
		return rep, err
	}
	buckets, err := n.Layer.ListBuckets(ctx)
	if err != nil {
		return rep, err
	}
	for _, b := range buckets {
		after := ""
		for {
			page, err := n.Layer.List(ctx, b.Name, object.ListOptions{After: after, MaxKeys: 1000})
			if errors.Is(err, object.ErrNoSuchBucket) {
				break
			}
			if err != nil {
				return rep, err
			}
			for _, o := range page.Objects {
				rep.Scanned++
				rec, err := sse.ParseObjectRecord(o.Headers[sse.ObjectHeader])
				if err != nil || rec.Mode != sse.ModeS3 || n.Keys.SealedWithActive(rec.Key) {
					continue
				}
				changed := false
				err = n.Layer.UpdateObject(ctx, b.Name, o.Key, func(cur *meta.Object) error {
					h, ch, err := n.rewrapHeaders(cur.Headers)
					if err == nil && ch {
						cur.Headers = h
					}
					changed = ch
					return err
				})
				if errors.Is(err, object.ErrNoSuchKey) {
					continue
				}
				if err != nil {
					return rep, err
				}
				if changed {
					rep.Objects++
				}
			}
			if !page.Truncated {
				break
			}
			after = page.NextAfter
		}
		// Noncurrent versions and the records snapshots and clones still
		// see: dropping the old key would leave them unreadable.
		scanned, changed, err := n.Layer.RewriteHistoryHeaders(ctx, b.Name, n.rewrapHeaders)
		if err != nil {
			return rep, err
		}
		rep.HistoryScanned += scanned
		rep.History += changed
	}
	return rep, nil
}

// rewrapHeaders re-seals an SSE-S3 record's data key with the active
// master key; ok is false when there is nothing to change (not SSE-S3, or
// sealed with the active key already).
func (n *Node) rewrapHeaders(headers map[string]string) (map[string]string, bool, error) {
	r, err := sse.ParseObjectRecord(headers[sse.ObjectHeader])
	if err != nil || r.Mode != sse.ModeS3 {
		return nil, false, nil // not SSE-S3 (or overwritten meanwhile)
	}
	key, ch, err := n.Keys.Rewrap(sse.PurposeObjectKey, r.Key)
	if err != nil || !ch {
		return nil, false, err
	}
	r.Key = key
	h := make(map[string]string, len(headers))
	for k, v := range headers {
		h[k] = v
	}
	h[sse.ObjectHeader] = r.Encode()
	return h, true, nil
}
