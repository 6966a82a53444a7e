package lifecycle

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// BucketAttr is the bucket attribute holding a bucket's Config (JSON).
const BucketAttr = "s3.lifecycle"

// MaxRules is S3's limit per bucket.
const MaxRules = 1000

// Config is a bucket's lifecycle configuration.
type Config struct {
	Rules []Rule `json:"rules"`
}

// Rule is one lifecycle rule.
type Rule struct {
	ID      string `json:"id"`
	Enabled bool   `json:"enabled"`
	// Filter: every condition must hold (empty: every object).
	Prefix  string            `json:"prefix,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
	MinSize int64             `json:"min_size,omitempty"` // ObjectSizeGreaterThan (exclusive)
	MaxSize int64             `json:"max_size,omitempty"` // ObjectSizeLessThan (exclusive), 0 = none

	Expiration *Expiration  `json:"expiration,omitempty"`
	Transition []Transition `json:"transitions,omitempty"`
	// AbortDays aborts multipart uploads this many days after they were
	// started (0: never).
	AbortDays int `json:"abort_days,omitempty"`
	// NoncurrentDays removes a version of a versioned bucket this many
	// days after a newer version replaced it (NoncurrentVersionExpiration;
	// 0: never). Unversioned buckets have no noncurrent versions.
	NoncurrentDays int `json:"noncurrent_days,omitempty"`
}

// Expiration deletes an object Days after it was written or at Date.
type Expiration struct {
	Days int       `json:"days,omitempty"`
	Date time.Time `json:"date,omitzero"`
	// DeleteMarker (ExpiredObjectDeleteMarker) removes a delete marker
	// that is the only version left of its key.
	DeleteMarker bool `json:"delete_marker,omitempty"`
}

// Transition moves an object to Class Days after it was written or at
// Date.
type Transition struct {
	Days  int       `json:"days,omitempty"`
	Date  time.Time `json:"date,omitzero"`
	Class string    `json:"class"`
}

// Validation errors (the gateway answers them as InvalidArgument or
// MalformedXML).
var (
	ErrInvalid = errors.New("lifecycle: invalid configuration")
)

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, a...))
}

// Validate checks a configuration against S3's rules. classOK says whether
// a storage class exists (Terrace's class table).
func (c Config) Validate(classOK func(string) bool) error {
	if len(c.Rules) == 0 {
		return invalid("at least one rule is required")
	}
	if len(c.Rules) > MaxRules {
		return invalid("at most %d rules", MaxRules)
	}
	ids := map[string]bool{}
	for i, r := range c.Rules {
		name := r.ID
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if len(r.ID) > 255 {
			return invalid("rule %s: ID longer than 255 characters", name)
		}
		if r.ID != "" {
			if ids[r.ID] {
				return invalid("rule ID %q is used twice", r.ID)
			}
			ids[r.ID] = true
		}
		if r.Expiration == nil && len(r.Transition) == 0 && r.AbortDays == 0 && r.NoncurrentDays == 0 {
			return invalid("rule %s: at least one action is required", name)
		}
		if r.MinSize < 0 || r.MaxSize < 0 || (r.MaxSize > 0 && r.MaxSize <= r.MinSize) {
			return invalid("rule %s: ObjectSizeLessThan must be greater than ObjectSizeGreaterThan", name)
		}
		if r.AbortDays < 0 || r.NoncurrentDays < 0 {
			return invalid("rule %s: days must be positive", name)
		}
		if r.AbortDays > 0 && len(r.Tags) > 0 {
			return invalid("rule %s: AbortIncompleteMultipartUpload cannot be specified with Tags", name)
		}
		if e := r.Expiration; e != nil {
			if err := checkWhen(name, "Expiration", e.Days, e.Date, e.DeleteMarker); err != nil {
				return err
			}
			if e.DeleteMarker && len(r.Tags) > 0 {
				return invalid("rule %s: ExpiredObjectDeleteMarker cannot be specified with Tags", name)
			}
		}
		seen := map[string]bool{}
		usesDays, usesDate := false, false
		for _, t := range r.Transition {
			if err := checkWhen(name, "Transition", t.Days, t.Date, false); err != nil {
				return err
			}
			if t.Class == "" || t.Class == "STANDARD" || !classOK(t.Class) {
				return invalid("rule %s: transition storage class %q is not valid", name, t.Class)
			}
			if seen[t.Class] {
				return invalid("rule %s: two transitions to %s", name, t.Class)
			}
			seen[t.Class] = true
			usesDays = usesDays || t.Days > 0
			usesDate = usesDate || !t.Date.IsZero()
			if e := r.Expiration; e != nil && e.Days > 0 && t.Days > 0 && e.Days <= t.Days {
				return invalid("rule %s: Days in the Expiration action must be greater than Days in the Transition action", name)
			}
		}
		if usesDays && usesDate {
			return invalid("rule %s: transitions must all use Days or all use Date", name)
		}
	}
	return nil
}

func checkWhen(rule, action string, days int, date time.Time, marker bool) error {
	set := 0
	if days != 0 {
		set++
	}
	if !date.IsZero() {
		set++
	}
	if marker {
		set++
	}
	switch {
	case set != 1:
		return invalid("rule %s: %s needs exactly one of Days or Date", rule, action)
	case days < 0:
		return invalid("rule %s: %s Days must be a positive integer", rule, action)
	case !date.IsZero() && !date.Equal(date.UTC().Truncate(24*time.Hour)):
		return invalid("rule %s: %s Date must be midnight UTC", rule, action)
	}
	return nil
}

// Object is what rules look at.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
	Tags     map[string]string
	Class    string // "" is STANDARD
}

// Kind is what to do with an object.
type Kind string

// Kinds.
const (
	None         Kind = ""
	Expire       Kind = "expire"
	TransitionTo Kind = "transition"
)

// Action is a decision.
type Action struct {
	Kind  Kind
	Class string // TransitionTo
	Rule  string // the deciding rule's ID (or #N)
	// Due is when the action became due.
	Due time.Time
}

func (r Rule) matches(o Object) bool {
	if !r.Enabled || !strings.HasPrefix(o.Key, r.Prefix) {
		return false
	}
	if o.Size <= r.MinSize && r.MinSize > 0 {
		return false
	}
	if r.MaxSize > 0 && o.Size >= r.MaxSize {
		return false
	}
	for k, v := range r.Tags {
		if o.Tags[k] != v {
			return false
		}
	}
	return true
}

func (r Rule) name(i int) string {
	if r.ID != "" {
		return r.ID
	}
	return fmt.Sprintf("#%d", i+1)
}

// dueAfter is when something written at t becomes due after days: t plus
// the days, rounded up to the next day boundary (midnight UTC for real
// days), as S3 computes it.
func dueAfter(t time.Time, days int, day time.Duration) time.Time {
	if day <= 0 {
		day = 24 * time.Hour
	}
	at := t.Add(time.Duration(days) * day)
	r := at.UTC().Truncate(day)
	if r.Before(at) {
		r = r.Add(day)
	}
	return r
}

func due(t time.Time, days int, date time.Time, day time.Duration) time.Time {
	if !date.IsZero() {
		return date
	}
	return dueAfter(t, days, day)
}

// Decide returns what the rules do to an object at now: expiration wins
// over transitions; among due transitions the one due last wins (the
// furthest along the object's life); an object already in that class is
// left alone. day is the length of a lifecycle day (24h but in demos).
func (c Config) Decide(o Object, now time.Time, day time.Duration) Action {
	var best Action
	for i, r := range c.Rules {
		if !r.matches(o) {
			continue
		}
		if e := r.Expiration; e != nil && (e.Days > 0 || !e.Date.IsZero()) {
			if d := due(o.Modified, e.Days, e.Date, day); !now.Before(d) {
				return Action{Kind: Expire, Rule: r.name(i), Due: d}
			}
		}
		for _, t := range r.Transition {
			d := due(o.Modified, t.Days, t.Date, day)
			if now.Before(d) {
				continue
			}
			if best.Kind == None || d.After(best.Due) {
				best = Action{Kind: TransitionTo, Class: t.Class, Rule: r.name(i), Due: d}
			}
		}
	}
	cur := o.Class
	if cur == "" {
		cur = "STANDARD"
	}
	if best.Kind == TransitionTo && best.Class == cur {
		return Action{}
	}
	return best
}

// DecideNoncurrent reports whether a noncurrent version o, replaced by a
// newer version at since, is due for removal at now, and by which rule:
// NoncurrentDays after since, rounded up to a day boundary as for
// expirations. The rule's filter applies to the version (its key, size
// and tags).
func (c Config) DecideNoncurrent(o Object, since, now time.Time, day time.Duration) (bool, string) {
	for i, r := range c.Rules {
		if r.NoncurrentDays <= 0 || !r.matches(o) {
			continue
		}
		if !now.Before(dueAfter(since, r.NoncurrentDays, day)) {
			return true, r.name(i)
		}
	}
	return false, ""
}

// DecideLoneMarker reports whether a delete marker that is the only
// version left of key is removed (ExpiredObjectDeleteMarker), and by which
// rule. Such a marker hides nothing; removing it makes the key simply
// absent.
func (c Config) DecideLoneMarker(key string) (bool, string) {
	for i, r := range c.Rules {
		if r.Enabled && r.Expiration != nil && r.Expiration.DeleteMarker && strings.HasPrefix(key, r.Prefix) && len(r.Tags) == 0 {
			return true, r.name(i)
		}
	}
	return false, ""
}

// DecideUpload reports whether a multipart upload started at initiated
// should be aborted at now, and by which rule.
func (c Config) DecideUpload(key string, initiated, now time.Time, day time.Duration) (bool, string) {
	for i, r := range c.Rules {
		if !r.Enabled || r.AbortDays == 0 || !strings.HasPrefix(key, r.Prefix) {
			continue
		}
		if !now.Before(dueAfter(initiated, r.AbortDays, day)) {
			return true, r.name(i)
		}
	}
	return false, ""
}

// NextDue returns the earliest time after now at which Decide could change
// its answer for o (zero if never): for reports ("pending by rule").
func (c Config) NextDue(o Object, now time.Time, day time.Duration) (time.Time, string) {
	var next time.Time
	var rule string
	consider := func(d time.Time, id string) {
		if d.After(now) && (next.IsZero() || d.Before(next)) {
			next, rule = d, id
		}
	}
	for i, r := range c.Rules {
		if !r.matches(o) {
			continue
		}
		if e := r.Expiration; e != nil && (e.Days > 0 || !e.Date.IsZero()) {
			consider(due(o.Modified, e.Days, e.Date, day), r.name(i))
		}
		for _, t := range r.Transition {
			consider(due(o.Modified, t.Days, t.Date, day), r.name(i))
		}
	}
	return next, rule
}

// SortedIDs lists the rule names in order (for reports).
func (c Config) SortedIDs() []string {
	out := make([]string, 0, len(c.Rules))
	for i, r := range c.Rules {
		out = append(out, r.name(i))
	}
	sort.Strings(out)
	return out
}
