package checker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/terrace-storage/terrace/internal/chaos/history"
)

// TestDataDriven runs the histories in testdata/. One command:
//
//	check
//	<op> lines, one per operation, times in any unit:
//	  put KEY VALUE CALL RET [ok|unknown|fail]     (mpu: a multipart write)
//	  del KEY CALL RET [ok|unknown|fail]
//	  get KEY VALUE CALL RET [final]               VALUE: a letter written by a put,
//	                                               - (absent), ! (the read failed),
//	                                               #x (bytes no put wrote), @KEY/x (KEY's value x)
//	  list PREFIX CALL RET KEY=VALUE...
//
// A value x stands for an object with digest "x", size len(x)*7 and ETag
// "e-x". The output is the report. Rewrite with -rewrite.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "check" {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			ops, err := parseHistory(d.Input)
			if err != nil {
				d.Fatalf(t, "%v", err)
			}
			return printReport(Check(ops, Options{}))
		})
	})
}

func obj(v string) (digest string, size int64, etag string) {
	return v, int64(len(v) * 7), "e-" + v
}

func parseHistory(in string) ([]history.Op, error) {
	var ops []history.Op
	for i, line := range strings.Split(strings.TrimSpace(in), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		op := history.Op{ID: int64(i + 1), Client: i, Node: "n1", Outcome: history.OK}
		num := func(s string) (int64, error) {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("line %d: %q: %v", i+1, s, err)
			}
			return v, nil
		}
		times := func(a, b string) error {
			var err error
			if op.Call, err = num(a); err != nil {
				return err
			}
			op.Return, err = num(b)
			return err
		}
		outcome := func(rest []string) {
			for _, w := range rest {
				switch w {
				case "ok", "unknown", "fail":
					op.Outcome = history.Outcome(w)
				case "final":
					op.Final = true
				}
			}
		}
		switch f[0] {
		case "put", "mpu":
			if len(f) < 5 {
				return nil, fmt.Errorf("line %d: put KEY VALUE CALL RET [outcome]", i+1)
			}
			op.Kind = history.Put
			if f[0] == "mpu" {
				op.Kind = history.Multipart
			}
			op.Key = f[1]
			op.Write = int64(i + 1)
			op.Digest, op.Size, op.ETag = obj(f[2])
			if err := times(f[3], f[4]); err != nil {
				return nil, err
			}
			outcome(f[5:])
		case "del":
			if len(f) < 4 {
				return nil, fmt.Errorf("line %d: del KEY CALL RET [outcome]", i+1)
			}
			op.Kind, op.Key = history.Delete, f[1]
			if err := times(f[2], f[3]); err != nil {
				return nil, err
			}
			outcome(f[4:])
		case "get":
			if len(f) < 5 {
				return nil, fmt.Errorf("line %d: get KEY VALUE CALL RET [final]", i+1)
			}
			op.Kind, op.Key = history.Get, f[1]
			switch v := f[2]; {
			case v == "-":
			case v == "!":
				op.Outcome, op.Err = history.Unknown, "timeout"
			case strings.HasPrefix(v, "#"):
				op.Found = true
				op.Digest, op.Size, op.ETag = obj(v)
			case strings.HasPrefix(v, "@"):
				op.Found = true
				_, x, _ := strings.Cut(v, "/")
				op.Digest, op.Size, op.ETag = obj(x)
			default:
				op.Found = true
				op.Digest, op.Size, op.ETag = obj(v)
			}
			if err := times(f[3], f[4]); err != nil {
				return nil, err
			}
			outcome(f[5:])
		case "list":
			if len(f) < 4 {
				return nil, fmt.Errorf("line %d: list PREFIX CALL RET KEY=VALUE...", i+1)
			}
			op.Kind, op.Prefix = history.List, f[1]
			if err := times(f[2], f[3]); err != nil {
				return nil, err
			}
			for _, e := range f[4:] {
				k, v, _ := strings.Cut(e, "=")
				_, size, etag := obj(v)
				op.Entries = append(op.Entries, history.Entry{Key: k, Size: size, ETag: etag})
			}
		default:
			return nil, fmt.Errorf("line %d: unknown operation %q", i+1, f[0])
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func printReport(r *Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "operations=%d keys=%d linearizable=%d\n", r.Ops, r.Keys, r.LinearizableKeys)
	for _, s := range []struct {
		name string
		fs   Findings
	}{{"lost", r.Lost}, {"corrupt", r.Corrupt}, {"resurrected", r.Resurrected}, {"anomaly", r.Anomalies}} {
		for _, f := range s.fs.List {
			fmt.Fprintf(&b, "%s: %s\n", s.name, f)
		}
	}
	for _, k := range r.Undecided {
		fmt.Fprintf(&b, "undecided: %s\n", k)
	}
	if r.OK() {
		b.WriteString("verdict: ok\n")
	} else {
		b.WriteString("verdict: FAIL\n")
	}
	return b.String()
}
