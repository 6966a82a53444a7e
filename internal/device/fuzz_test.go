package device

import (
	"strings"
	"testing"
)

// FuzzParseSpec: the --device flag and the devices: YAML list never crash
// the parser, and an accepted spec has a sane tier, path and capacity and
// prints back to a spec that parses to the same device.
func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{"ssd:/data/ssd0:20GiB", "mem::2GiB", "hdd:/d/h:200GiB:hdd", "remote:http://k:s@127.0.0.1:9000/b/p:1GiB",
		"ssd:/x:1e400", "ssd:/x:NaN", "ssd:/x:-1", "any:/x:1G", "::", "ssd:/x:1GiB:nope", "hdd::1G", "mem:/x:1G", "remote:http://:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpec(s)
		if err != nil {
			return
		}
		if sp.Capacity <= 0 || sp.Tier == "" || sp.Tier == "any" {
			t.Fatalf("%q accepted as %+v", s, sp)
		}
		if sp.Remote() || strings.ContainsAny(sp.Path, ":") {
			return // URLs and colon paths print with their own quoting rules
		}
		back, err := ParseSpec(sp.String())
		if err != nil || back.Tier != sp.Tier || back.Path != sp.Path || back.Profile != sp.Profile {
			t.Fatalf("%q -> %q -> %+v, %v", s, sp.String(), back, err)
		}
	})
}

// FuzzParseBytes: sizes are non-negative, bounded, and never NaN or a
// wrapped-around negative number.
func FuzzParseBytes(f *testing.F) {
	for _, s := range []string{"512", "4KiB", "1.5GB", "10M", "1e400TiB", "-0", "NaN", "Inf", "0x10", " 7 B "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseBytes(s)
		if err == nil && (n < 0 || n > 1<<62) {
			t.Fatalf("%q -> %d", s, n)
		}
	})
}
