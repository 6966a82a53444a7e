package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tier names a class of media. The four built-in tiers are ranked from
// fastest to slowest; operators may define more (any lowercase name).
type Tier string

// Built-in tiers. TierAny is not a media tier: in a Vector it counts the
// replicas whose tier the system picks ("unspecified" in OctopusFS §2.3).
const (
	TierMem    Tier = "mem"
	TierSSD    Tier = "ssd"
	TierHDD    Tier = "hdd"
	TierRemote Tier = "remote"
	TierAny    Tier = "any"
)

// MaxReplicas bounds the total replica count of a vector. Eight replicas
// already cost 8x the space; anything larger is almost certainly a typo.
const MaxReplicas = 8

// ValidTierName reports whether s may name a tier: a lower-case letter,
// then up to 31 lower-case letters, digits, '_' or '-'
// (^[a-z][a-z0-9_-]{0,31}$). It is a loop rather than a regular
// expression because every vector decoded from a metadata record checks
// its tier names: a regexp match was a tenth of decoding an egroup record.
func ValidTierName(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Rank orders tiers from fastest (0) to slowest. Operator-defined tiers rank
// between hdd and remote: they are local media of unknown speed, and the
// remote tier is always the last resort.
func (t Tier) Rank() int {
	switch t {
	case TierMem:
		return 0
	case TierSSD:
		return 1
	case TierHDD:
		return 2
	case TierRemote:
		return 4
	case TierAny:
		return 5
	default:
		return 3
	}
}

// SortTiers sorts tiers fastest first, then by name.
func SortTiers(ts []Tier) {
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Rank() != ts[j].Rank() {
			return ts[i].Rank() < ts[j].Rank()
		}
		return ts[i] < ts[j]
	})
}

// Vector is a replication vector: how many replicas an object keeps on each
// tier (OctopusFS §2.3). Counts[TierAny] replicas go wherever the placement
// policy decides. The zero Vector means "inherit the default".
type Vector struct {
	Counts map[Tier]int
}

// ErrInvalidVector wraps every vector parsing and validation error.
var ErrInvalidVector = errors.New("invalid replication vector")

// ParseVector parses "ssd=1,hdd=2" or "any=3". "unspecified" is accepted as
// a synonym for "any", and a bare number N means "any=N".
func ParseVector(s string) (Vector, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Vector{}, fmt.Errorf("%w: empty", ErrInvalidVector)
	}
	if n, err := strconv.Atoi(s); err == nil {
		v := Vector{Counts: map[Tier]int{TierAny: n}}
		return v, v.Validate()
	}
	v := Vector{Counts: map[Tier]int{}}
	for _, part := range strings.Split(s, ",") {
		name, num, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return Vector{}, fmt.Errorf("%w: %q is not tier=count", ErrInvalidVector, part)
		}
		name = strings.TrimSpace(name)
		if name == "unspecified" {
			name = string(TierAny)
		}
		if !ValidTierName(name) {
			return Vector{}, fmt.Errorf("%w: bad tier name %q", ErrInvalidVector, name)
		}
		n, err := strconv.Atoi(strings.TrimSpace(num))
		if err != nil {
			return Vector{}, fmt.Errorf("%w: count %q for tier %s is not a number", ErrInvalidVector, num, name)
		}
		if _, dup := v.Counts[Tier(name)]; dup {
			return Vector{}, fmt.Errorf("%w: tier %s given twice", ErrInvalidVector, name)
		}
		v.Counts[Tier(name)] = n
	}
	return v, v.Validate()
}

// MustParseVector is ParseVector for constants in tests and defaults.
func MustParseVector(s string) Vector {
	v, err := ParseVector(s)
	if err != nil {
		panic(err)
	}
	return v
}

// Validate checks counts are non-negative and the total is in [1, MaxReplicas].
func (v Vector) Validate() error {
	total := 0
	for t, n := range v.Counts {
		if n < 0 {
			return fmt.Errorf("%w: negative count %d for tier %s", ErrInvalidVector, n, t)
		}
		// A sum of huge counts could wrap around into the valid range;
		// counts this large are refused on their own.
		if n > 1<<20 {
			return fmt.Errorf("%w: %d replicas on tier %s exceeds the maximum of %d", ErrInvalidVector, n, t, MaxReplicas)
		}
		total += n
	}
	if total < 1 {
		return fmt.Errorf("%w: needs at least one replica", ErrInvalidVector)
	}
	if total > MaxReplicas {
		return fmt.Errorf("%w: %d replicas exceeds the maximum of %d", ErrInvalidVector, total, MaxReplicas)
	}
	return nil
}

// IsZero reports whether v carries no counts (inherit the default).
func (v Vector) IsZero() bool {
	for _, n := range v.Counts {
		if n != 0 {
			return false
		}
	}
	return true
}

// Total is the number of replicas the vector demands.
func (v Vector) Total() int {
	total := 0
	for _, n := range v.Counts {
		total += n
	}
	return total
}

// Count returns the replicas demanded on tier t.
func (v Vector) Count(t Tier) int { return v.Counts[t] }

// Tiers returns the tiers with a non-zero count, fastest first, "any" last.
func (v Vector) Tiers() []Tier {
	var ts []Tier
	for t, n := range v.Counts {
		if n > 0 {
			ts = append(ts, t)
		}
	}
	SortTiers(ts)
	return ts
}

// String prints the vector in the syntax ParseVector reads.
func (v Vector) String() string {
	if v.IsZero() {
		return ""
	}
	var b strings.Builder
	for i, t := range v.Tiers() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", t, v.Counts[t])
	}
	return b.String()
}

// Equal reports whether two vectors demand the same replicas.
func (v Vector) Equal(o Vector) bool { return v.String() == o.String() }

// Clone returns a deep copy.
func (v Vector) Clone() Vector {
	c := Vector{Counts: make(map[Tier]int, len(v.Counts))}
	for t, n := range v.Counts {
		c.Counts[t] = n
	}
	return c
}

// MarshalText implements encoding.TextMarshaler so vectors serialise compactly.
func (v Vector) MarshalText() ([]byte, error) { return []byte(v.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Vector) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*v = Vector{}
		return nil
	}
	p, err := ParseVector(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}

// ForAny reports whether unspecified ("any") replicas may be placed on
// tier t when data is written: memory only when allowed (it is volatile),
// and never the remote tier, which is the capacity tier the Curator demotes
// cold data to, too slow for foreground writes.
func (t Tier) ForAny(allowMem bool) bool {
	switch t {
	case TierMem:
		return allowMem
	case TierRemote, TierAny:
		return false
	}
	return true
}
