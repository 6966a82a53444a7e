package object

import (
	"context"
	"strings"

	"github.com/terrace-storage/terrace/internal/meta"
)

// ListOptions select a page of a bucket listing.
type ListOptions struct {
	Prefix    string
	Delimiter string
	// After lists keys strictly after this one (marker / start-after /
	// continuation token).
	After   string
	MaxKeys int
}

// ListResult is one page.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	Truncated      bool
	// NextAfter continues the listing when Truncated.
	NextAfter string
}

// maxListKeys is S3's page limit.
const maxListKeys = 1000

// List lists a bucket in key order, rolling keys that contain Delimiter
// after Prefix up into common prefixes.
func (l *Layer) List(ctx context.Context, bucket string, o ListOptions) (ListResult, error) {
	if _, _, err := l.GetBucket(ctx, bucket); err != nil {
		return ListResult{}, err
	}
	if o.MaxKeys <= 0 || o.MaxKeys > maxListKeys {
		o.MaxKeys = maxListKeys
	}
	var res ListResult
	base := meta.ObjectPrefix(bucket, "")
	end := meta.PrefixEnd(meta.ObjectPrefix(bucket, o.Prefix))
	start := meta.ObjectPrefix(bucket, o.Prefix)
	if o.After != "" {
		if after := append(meta.ObjectPrefix(bucket, o.After), 0); string(after) > string(start) {
			start = after
		}
	}
	// Skip past a common prefix that After points into, so a continuation
	// does not repeat it.
	if o.Delimiter != "" && o.After != "" && strings.HasPrefix(o.After, o.Prefix) {
		rest := o.After[len(o.Prefix):]
		if i := strings.Index(rest, o.Delimiter); i >= 0 {
			cp := o.Prefix + rest[:i+len(o.Delimiter)]
			if cp == o.After || strings.HasPrefix(o.After, cp) {
				if e := meta.PrefixEnd(meta.ObjectPrefix(bucket, cp)); string(e) > string(start) {
					start = e
				}
			}
		}
	}
	count := 0
	const batch = 256
	for {
		items, err := l.kv.Scan(ctx, start, end, batch)
		if err != nil {
			return ListResult{}, err
		}
		jumped := false
		for _, it := range items {
			if count >= o.MaxKeys {
				res.Truncated = true
				return res, nil
			}
			key := string(it.Key[len(base):])
			if o.Delimiter != "" {
				rest := key[len(o.Prefix):]
				if i := strings.Index(rest, o.Delimiter); i >= 0 {
					cp := o.Prefix + rest[:i+len(o.Delimiter)]
					res.CommonPrefixes = append(res.CommonPrefixes, cp)
					res.NextAfter = cp
					count++
					// Jump over every key under the common prefix.
					start = meta.PrefixEnd(meta.ObjectPrefix(bucket, cp))
					jumped = true
					break
				}
			}
			var obj meta.Object
			if err := meta.Decode(it.Value, &obj); err != nil {
				return ListResult{}, err
			}
			res.Objects = append(res.Objects, ObjectInfo{Bucket: bucket, Key: key, Object: obj})
			res.NextAfter = key
			count++
			start = append(append([]byte(nil), it.Key...), 0)
		}
		if !jumped && len(items) < batch {
			return res, nil
		}
		if start == nil || (end != nil && string(start) >= string(end)) {
			return res, nil
		}
	}
}
