package layout

import (
	"fmt"
	"strconv"
	"strings"
)

// Parse reads a layout in the syntax String prints, so a printed layout
// pastes back as a test case. A replica is a device ID "node/dev", with
// "(stale)" appended when stale; its node is the part before the '/'.
func Parse(text string) (Layout, error) {
	var l Layout
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) == 0 {
		return l, fmt.Errorf("layout: empty text")
	}
	if _, err := fmt.Sscanf(strings.TrimSpace(lines[0]), "epoch %d next %d", &l.Epoch, &l.NextSegment); err != nil {
		return l, fmt.Errorf("layout: first line %q: want \"epoch E next N\"", lines[0])
	}
	for _, line := range lines[1:] {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		head, body, ok := strings.Cut(line, ":")
		if !ok {
			return l, fmt.Errorf("layout: line %q: want segment ID [S, E) epoch N: 0=dev,dev 1=dev,dev", line)
		}
		var seg Segment
		var end string
		if _, err := fmt.Sscanf(head, "segment %d [%d, %s epoch %d", &seg.ID, &seg.Start, &end, &seg.Epoch); err != nil {
			return l, fmt.Errorf("layout: line %q: %v", line, err)
		}
		end = strings.TrimSuffix(end, ")")
		if end != "open" {
			v, err := strconv.ParseUint(end, 10, 64)
			if err != nil {
				return l, fmt.Errorf("layout: line %q: end %q", line, end)
			}
			seg.End = v
		}
		for i, f := range strings.Fields(body) {
			idx, reps, ok := strings.Cut(f, "=")
			if !ok || idx != strconv.Itoa(i) {
				return l, fmt.Errorf("layout: line %q: stripe %q: want %d=DEV[,DEV]", line, f, i)
			}
			var st []Replica
			for _, d := range strings.Split(reps, ",") {
				r := Replica{Device: d}
				if strings.HasSuffix(d, "(stale)") {
					r.Device, r.Stale = strings.TrimSuffix(d, "(stale)"), true
				}
				r.Node, _, _ = strings.Cut(r.Device, "/")
				st = append(st, r)
			}
			seg.Stripes = append(seg.Stripes, st)
		}
		l.Segments = append(l.Segments, seg)
	}
	return l, nil
}

// ParseRuns reads runs written as "0-5,7,9-12" (inclusive ranges of local
// indexes); "-" or "" is no runs.
func ParseRuns(s string) ([]Run, error) {
	var out []Run
	if s == "" || s == "-" {
		return nil, nil
	}
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "-")
		lo, err := strconv.ParseUint(a, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("layout: run %q", part)
		}
		hi := lo
		if isRange {
			if hi, err = strconv.ParseUint(b, 10, 64); err != nil || hi < lo {
				return nil, fmt.Errorf("layout: run %q", part)
			}
		}
		if n := len(out); n > 0 && out[n-1].End > lo {
			return nil, fmt.Errorf("layout: runs %q not sorted and disjoint", s)
		}
		out = append(out, Run{lo, hi + 1})
	}
	return out, nil
}

// FormatRuns prints runs as ParseRuns reads them.
func FormatRuns(runs []Run) string {
	if len(runs) == 0 {
		return "-"
	}
	var parts []string
	for _, r := range runs {
		if r.End == r.Start+1 {
			parts = append(parts, strconv.FormatUint(r.Start, 10))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", r.Start, r.End-1))
		}
	}
	return strings.Join(parts, ",")
}
