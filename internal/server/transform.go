package server

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/transform"
)

// TransformConfig is the curator.transform section of the YAML
// configuration: thresholds of the Curator's transformations of cold data
// (docs/transforms.md). Zero values mean the defaults.
type TransformConfig struct {
	// TruncateMinBytes: dead egroup tails shorter than this are left.
	TruncateMinBytes int64 `yaml:"truncate_min_bytes"`
	// ColdAfter: an egroup unread and unwritten this long is cold, for
	// buckets that do not set their own (default 24h).
	ColdAfter time.Duration `yaml:"cold_after"`
	// MaxRatio: compression that stores more than this fraction of the
	// bytes does not pay (default 0.9).
	MaxRatio float64 `yaml:"max_ratio"`
	// PackBytes: live bytes one compression task packs (default 16 MiB).
	PackBytes int64 `yaml:"pack_bytes"`
	// HotReads within HotWindow make a compressed egroup hot again.
	HotReads  int64         `yaml:"hot_reads"`
	HotWindow time.Duration `yaml:"hot_window"`
}

func (t TransformConfig) validate() error {
	switch {
	case t.MaxRatio < 0 || t.MaxRatio > 1:
		return fmt.Errorf("server: curator.transform.max_ratio %.2f outside (0, 1]", t.MaxRatio)
	case t.TruncateMinBytes < 0, t.PackBytes < 0, t.HotReads < 0, t.ColdAfter < 0, t.HotWindow < 0:
		return fmt.Errorf("server: curator.transform: negative threshold in %+v", t)
	}
	return nil
}

func (t TransformConfig) options() decide.TransformOptions {
	return decide.TransformOptions{TruncateMinBytes: t.TruncateMinBytes, ColdAfter: t.ColdAfter, MaxRatio: t.MaxRatio,
		PackBytes: t.PackBytes, HotReads: t.HotReads, HotWindow: t.HotWindow}
}

// BucketTransform is the body of POST /v1/buckets/{bucket}/transform's
// answer and of the bucket listing's transform column.
type BucketTransform struct {
	Bucket    string `json:"bucket"`
	Compress  string `json:"compress"`
	EC        string `json:"ec"`
	Dedup     bool   `json:"dedup"`
	ColdAfter string `json:"cold_after,omitempty"`
}

// handleBucketTransform sets what the Curator may do to a bucket's cold
// data. Query: compress=zstd|none, ec=K+M|none, dedup=on|off,
// cold_after=DURATION (all
// optional; what is not given keeps its current value).
func (n *Node) handleBucketTransform(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("bucket")
	q := r.URL.Query()
	b, _, err := n.Layer.GetBucket(r.Context(), name)
	if err != nil {
		writeErr(w, err)
		return
	}
	var tf meta.BucketTransform
	if b.Transform != nil {
		tf = *b.Transform
	}
	bad := func(format string, args ...any) {
		writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf(format, args...), Code: "InvalidArgument"})
	}
	if q.Has("compress") {
		switch c := q.Get("compress"); c {
		case "none", "":
			tf.Compress = ""
		default:
			if !transform.ValidCodec(c) {
				bad("compress %q: use zstd or none", c)
				return
			}
			tf.Compress = c
		}
	}
	if q.Has("ec") {
		tf.EC = q.Get("ec")
		if tf.EC == "none" {
			tf.EC = ""
		}
	}
	if q.Has("dedup") {
		switch q.Get("dedup") {
		case "on", "true":
			tf.Dedup = true
		case "off", "false":
			tf.Dedup = false
		default:
			bad("dedup %q: use on or off", q.Get("dedup"))
			return
		}
	}
	if q.Has("cold_after") {
		d, err := time.ParseDuration(q.Get("cold_after"))
		if err != nil || d < 0 {
			bad("cold_after %q: a non-negative duration such as 24h or 30m", q.Get("cold_after"))
			return
		}
		tf.ColdAfter = int64(d)
	}
	if err := n.Layer.SetBucketTransform(r.Context(), name, tf); err != nil {
		if errors.Is(err, object.ErrInvalidTransform) {
			bad("%v", err)
			return
		}
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, bucketTransform(name, &tf))
}

func bucketTransform(name string, tf *meta.BucketTransform) BucketTransform {
	out := BucketTransform{Bucket: name, Compress: "none", EC: "none"}
	if tf != nil && tf.Compress != "" {
		out.Compress = tf.Compress
	}
	if tf != nil && tf.EC != "" {
		out.EC = tf.EC
	}
	out.Dedup = tf != nil && tf.Dedup
	if tf != nil && tf.ColdAfter > 0 {
		out.ColdAfter = time.Duration(tf.ColdAfter).String()
	}
	return out
}
