package object

import (
	"context"
	"sort"
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
	v, b, err := l.resolve(ctx, bucket)
	if err != nil {
		return ListResult{}, err
	}
	if o.MaxKeys <= 0 || o.MaxKeys > maxListKeys {
		o.MaxKeys = maxListKeys
	}
	if !v.live() || b.Parent != nil {
		return l.listView(ctx, bucket, v, o)
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
	if cp := commonPrefixOf(o.After, o.Prefix, o.Delimiter); cp != "" {
		if e := meta.PrefixEnd(meta.ObjectPrefix(bucket, cp)); string(e) > string(start) {
			start = e
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
		// The page is full only when another entry is found: keys that
		// list as nothing (delete markers) after the last entry do not
		// make it truncated.
		for _, it := range items {
			key := string(it.Key[len(base):])
			if cp := commonPrefixOf(key, o.Prefix, o.Delimiter); cp != "" {
				// Jump over every key under the common prefix; it is
				// listed only if some key under it is not deleted.
				cpEnd := meta.PrefixEnd(meta.ObjectPrefix(bucket, cp))
				live, err := l.anyLive(ctx, it.Key, cpEnd)
				if err != nil {
					return ListResult{}, err
				}
				start, jumped = cpEnd, true
				if !live {
					break
				}
				if count >= o.MaxKeys {
					res.Truncated = true
					return res, nil
				}
				res.CommonPrefixes = append(res.CommonPrefixes, cp)
				res.NextAfter = cp
				count++
				break
			}
			var obj meta.Object
			if err := meta.Decode(it.Value, &obj); err != nil {
				return ListResult{}, err
			}
			if obj.DeleteMarker {
				start = append(append([]byte(nil), it.Key...), 0)
				continue // a deleted key of a versioned bucket
			}
			if count >= o.MaxKeys {
				res.Truncated = true
				return res, nil
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

// anyLive reports whether a record of the object map in [from, end) is
// an object rather than a delete marker.
func (l *Layer) anyLive(ctx context.Context, from, end []byte) (bool, error) {
	return l.anyObject(ctx, from, end, func(_ []byte, obj meta.Object) (bool, error) {
		return !obj.DeleteMarker, nil
	})
}

// anyObject reports whether match holds for some record of the object
// map in [from, end), scanning in batches until it does.
func (l *Layer) anyObject(ctx context.Context, from, end []byte, match func(key []byte, obj meta.Object) (bool, error)) (bool, error) {
	const batch = 256
	for {
		items, err := l.kv.Scan(ctx, from, end, batch)
		if err != nil {
			return false, err
		}
		for _, it := range items {
			var obj meta.Object
			if err := meta.Decode(it.Value, &obj); err != nil {
				return false, err
			}
			if ok, err := match(it.Key, obj); ok || err != nil {
				return ok, err
			}
		}
		if len(items) < batch {
			return false, nil
		}
		from = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
}

// listView lists a snapshot or a clone: the union of the keys the bucket
// and its ancestors have records of, each resolved to what a reader of the
// view sees. It is slower than a plain listing (a lookup per key); snapshot
// tree reduction turns a clone back into a plain bucket.
func (l *Layer) listView(ctx context.Context, name string, v view, o ListOptions) (ListResult, error) {
	chain, err := l.viewChain(ctx, v.bucket)
	if err != nil {
		return ListResult{}, err
	}
	var res ListResult
	cursor := o.After
	// A continuation after a common prefix (After is the prefix, or a key
	// under it) skips the prefix's keys, as List does, instead of listing
	// the prefix again.
	skip := commonPrefixOf(o.After, o.Prefix, o.Delimiter)
	for {
		keys, bound, err := l.viewKeys(ctx, chain, o.Prefix, cursor, false)
		if err != nil {
			return ListResult{}, err
		}
		if len(keys) == 0 {
			return res, nil
		}
		for _, k := range keys {
			if bound != "" && k > bound {
				break
			}
			cursor = k
			if o.Delimiter != "" {
				rest := k[len(o.Prefix):]
				if i := strings.Index(rest, o.Delimiter); i >= 0 {
					cp := o.Prefix + rest[:i+len(o.Delimiter)]
					if cp == skip {
						continue
					}
					if n := len(res.CommonPrefixes); n > 0 && res.CommonPrefixes[n-1] == cp {
						continue
					}
					_, found, err := l.visibleAt(ctx, v.bucket, k, v.rev, 0)
					if err != nil {
						return ListResult{}, err
					}
					if !found {
						continue
					}
					if len(res.Objects)+len(res.CommonPrefixes) >= o.MaxKeys {
						res.Truncated = true
						return res, nil
					}
					res.CommonPrefixes = append(res.CommonPrefixes, cp)
					res.NextAfter = cp
					continue
				}
			}
			rec, found, err := l.visibleAt(ctx, v.bucket, k, v.rev, 0)
			if err != nil {
				return ListResult{}, err
			}
			if !found {
				continue
			}
			if len(res.Objects)+len(res.CommonPrefixes) >= o.MaxKeys {
				res.Truncated = true
				return res, nil
			}
			res.Objects = append(res.Objects, ObjectInfo{Bucket: name, Key: k, Object: rec.Object})
			res.NextAfter = k
		}
		if bound == "" {
			return res, nil
		}
		cursor = bound
	}
}

// viewChain is the buckets whose object maps hold the keys a view of
// bucket may show: bucket and its ancestors.
func (l *Layer) viewChain(ctx context.Context, bucket string) ([]string, error) {
	chain := []string{bucket}
	for b := bucket; len(chain) <= maxCloneDepth; {
		rec, _, err := l.GetBucket(ctx, b)
		if err != nil {
			return nil, err
		}
		if rec.Parent == nil {
			break
		}
		b = rec.Parent.Bucket
		chain = append(chain, b)
	}
	return chain, nil
}

// viewKeys returns, sorted, the next keys under prefix after cursor (from
// it, when inclusive) that the buckets of chain have records of. Keys
// beyond bound ("" if none) may be missing: a bucket's scan stopped
// there; the caller continues after it.
func (l *Layer) viewKeys(ctx context.Context, chain []string, prefix, cursor string, inclusive bool) (keys []string, bound string, err error) {
	const batch = 256
	seen := map[string]bool{}
	for _, b := range chain {
		start := meta.ObjectPrefix(b, prefix)
		if cursor != "" {
			from := meta.ObjectPrefix(b, cursor)
			if !inclusive {
				from = append(from, 0)
			}
			if string(from) > string(start) {
				start = from
			}
		}
		items, err := l.kv.Scan(ctx, start, meta.PrefixEnd(meta.ObjectPrefix(b, prefix)), batch)
		if err != nil {
			return nil, "", err
		}
		for _, it := range items {
			_, k, _ := meta.SplitObjectKey(it.Key)
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if len(items) == batch {
			_, last, _ := meta.SplitObjectKey(items[len(items)-1].Key)
			if bound == "" || last < bound {
				bound = last
			}
		}
	}
	sort.Strings(keys)
	return keys, bound, nil
}
