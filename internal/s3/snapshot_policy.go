package s3

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/versity/versitygw/auth"
)

// snapshotPolicy renames the resources of bucket base's policy to served,
// the read-only bucket one of its snapshots is served as
// ("arn:aws:s3:::photos/secret/*" becomes
// "arn:aws:s3:::photos--snap-monday/secret/*").
//
// A snapshot is read with its source's settings, the policy among them,
// but versitygw matches a statement's resources against the bucket the
// request names. Served as stored, no statement would ever match a
// snapshot: an Allow would not carry over, and — the reason this exists —
// a Deny would not either, so whoever the ACL lets read the bucket could
// read through a snapshot what the policy denies them.
//
// versitygw accepts a policy only if every resource starts with its
// bucket's name, so renaming that prefix covers every statement; a
// resource that somehow does not start with it is kept as it is. Fields
// this function does not know are kept, numbers in conditions exactly.
func snapshotPolicy(raw []byte, base, served string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("policy of %s: %w", base, err)
	}
	from := auth.ResourceArnPrefix + base
	to := auth.ResourceArnPrefix + served
	rename := func(v any) (any, error) {
		switch r := v.(type) {
		case string:
			return renameResource(r, from, to), nil
		case []any:
			out := make([]any, len(r))
			for i, e := range r {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("policy of %s: a resource is %T, not a string", base, e)
				}
				out[i] = renameResource(s, from, to)
			}
			return out, nil
		}
		return nil, fmt.Errorf("policy of %s: Resource is %T, not a string or a list", base, v)
	}
	statement := func(v any) error {
		st, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("policy of %s: a statement is %T, not an object", base, v)
		}
		for _, field := range []string{"Resource", "NotResource"} {
			if r, ok := st[field]; ok {
				nr, err := rename(r)
				if err != nil {
					return err
				}
				st[field] = nr
			}
		}
		return nil
	}
	switch sts := doc["Statement"].(type) {
	case []any:
		for _, st := range sts {
			if err := statement(st); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		if err := statement(sts); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("policy of %s: Statement is %T", base, sts)
	}
	return json.Marshal(doc)
}

// renameResource replaces the bucket name at the start of one resource ARN:
// the whole name only ("photos" in "photos/..." or "photos*", never in
// "photosarchive/..."), unless a wildcard follows it.
func renameResource(r, from, to string) string {
	rest, ok := strings.CutPrefix(r, from)
	if !ok {
		return r
	}
	if rest == "" || rest[0] == '/' || rest[0] == '*' || rest[0] == '?' {
		return to + rest
	}
	return r
}
