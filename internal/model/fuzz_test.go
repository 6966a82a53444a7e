package model

import (
	"regexp"
	"testing"
)

// FuzzParseVector: any string either fails with ErrInvalidVector or gives
// a valid vector whose printed form parses back to the same vector (the
// --vector flag, the x-amz-storage-class mapping and YAML all go through
// ParseVector).
func FuzzParseVector(f *testing.F) {
	for _, s := range []string{"ssd=1,hdd=2", "any=3", "3", "unspecified=2", "ssd=1,ssd=1", "ssd=-1,hdd=3",
		"9223372036854775807", "a=9223372036854775807,b=9223372036854775807,c=4", " ssd = 1 ", "", "=", ",", "mem=1,any=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVector(s)
		if err != nil {
			return
		}
		total := 0
		for tier, n := range v.Counts {
			if n < 0 || n > MaxReplicas || !ValidTierName(string(tier)) {
				t.Fatalf("%q parsed to an out-of-range count %d for %q", s, n, tier)
			}
			total += n
		}
		if total < 1 || total > MaxReplicas {
			t.Fatalf("%q parsed to %d replicas", s, total)
		}
		back, err := ParseVector(v.String())
		if err != nil || !back.Equal(v) {
			t.Fatalf("%q -> %q does not parse back: %v", s, v.String(), err)
		}
	})
}

// FuzzValidTierName: the hand-written check accepts exactly the names the
// regular expression it replaced accepts.
func FuzzValidTierName(f *testing.F) {
	re := regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)
	for _, s := range []string{"ssd", "hdd", "any", "nvme-2", "a_b", "", "A", "1ssd", "ssd\n", "abcdefghijklmnopqrstuvwxyz012345", "abcdefghijklmnopqrstuvwxyz0123456", "é", "s d", "x-", "x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidTierName(s), re.MatchString(s); got != want {
			t.Fatalf("ValidTierName(%q) = %v, the expression says %v", s, got, want)
		}
	})
}
