package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSimScanCommand: `terrace sim scan` loads and scans a small map and
// prints the time, rate and peak memory; --json gives the same numbers as
// an object; bad sizes are refused.
func TestSimScanCommand(t *testing.T) {
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		root := newRootCmd()
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args)
		err := root.Execute()
		return out.String(), err
	}
	out, err := run("sim", "scan", "--egroups", "2000", "--nodes", "3", "--dir", t.TempDir())
	if err != nil {
		t.Fatalf("sim scan: %v\n%s", err, out)
	}
	for _, want := range []string{"partial scan of 2000 egroups on 3 nodes", "records/s", "peak rss:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("sim scan output lacks %q:\n%s", want, out)
		}
	}
	out, err = run("--json", "sim", "scan", "--egroups", "500", "--full", "--extents", "2")
	if err != nil {
		t.Fatalf("sim scan --full --json: %v\n%s", err, out)
	}
	var r struct {
		Egroups int     `json:"egroups"`
		Full    bool    `json:"full"`
		Records int     `json:"records"`
		Rate    float64 `json:"records_per_second"`
		Peak    uint64  `json:"peak_rss_bytes"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	// 500 egroups, ~300 access records, 1000 extents, ~900 objects.
	if r.Egroups != 500 || !r.Full || r.Records < 2000 || r.Rate <= 0 || r.Peak == 0 {
		t.Fatalf("--json: %+v", r)
	}
	for _, bad := range [][]string{{"sim", "scan", "--nodes", "1"}, {"sim", "scan", "--full", "--extents", "64"}, {"sim", "scan", "extra"}} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
}
