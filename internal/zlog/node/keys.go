package node

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terrace-storage/terrace/internal/zlog/layout"
)

// Metadata keys of the shared log (all under "l/", a prefix no other map
// uses):
//
//	l/r/<name>  the log's record (layout.Record, JSON)
//	l/y/<name>  its layout (layout.Layout, JSON); changed only by the
//	            sequencer host, with compare-and-swap
//	l/q/<name>  its sequencer host (hostRecord), attached to the host's
//	            etcd lease so it vanishes when the host dies
//	l/id        the last log ID handed out
const (
	prefix       = "l/"
	prefixRecord = "l/r/"
	prefixLayout = "l/y/"
	prefixHost   = "l/q/"
	keyLastID    = "l/id"
)

func recordKey(name string) []byte { return []byte(prefixRecord + name) }
func layoutKey(name string) []byte { return []byte(prefixLayout + name) }
func hostKey(name string) []byte   { return []byte(prefixHost + name) }

// hostRecord is the value of l/q/<name>.
type hostRecord struct {
	Node    string `json:"node"`
	LeaseID int64  `json:"lease,omitempty"`
	Since   int64  `json:"since"`
}

// splitKey returns the map ("r", "y", "q") and log name of a key.
func splitKey(k string) (string, string, bool) {
	for _, p := range []string{prefixRecord, prefixLayout, prefixHost} {
		if strings.HasPrefix(k, p) {
			return p[2:3], strings.TrimPrefix(k, p), true
		}
	}
	return "", "", false
}

func decodeRecord(b []byte) (layout.Record, error) {
	var r layout.Record
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("node: log record: %w", err)
	}
	return r, nil
}

func decodeLayout(b []byte) (layout.Layout, error) {
	var l layout.Layout
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("node: log layout: %w", err)
	}
	return l, nil
}

func decodeHost(b []byte) (hostRecord, error) {
	var h hostRecord
	if err := json.Unmarshal(b, &h); err != nil {
		return h, fmt.Errorf("node: log host: %w", err)
	}
	return h, nil
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs: cannot fail
	}
	return b
}
