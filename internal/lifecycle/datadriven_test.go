package lifecycle

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenario files in testdata/. Commands:
//
//	config [day=DURATION]          body: a Config as JSON; prints "ok" or the validation error
//	decide key=K [size=N] [modified=RFC3339] [now=RFC3339] [class=C] [tags=k:v,...]
//	                               prints the action, or "none" and when the next one is due
//	upload key=K initiated=RFC3339 now=RFC3339
//	                               prints whether the upload is aborted and by which rule
//	noncurrent key=K since=RFC3339 now=RFC3339 [size=N]
//	                               a version replaced at since: removed, and by which rule?
//	marker key=K                   a delete marker left alone: removed, and by which rule?
//
// Rewrite expectations with: go test ./internal/lifecycle -run DataDriven -rewrite
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var cfg Config
		day := 24 * time.Hour
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			ts := func(k string) time.Time {
				v, err := time.Parse(time.RFC3339, args[k])
				if err != nil {
					d.Fatalf(t, "%s: %v", k, err)
				}
				return v
			}
			switch d.Cmd {
			case "config":
				cfg = Config{}
				day = 24 * time.Hour
				if v := args["day"]; v != "" {
					var err error
					if day, err = time.ParseDuration(v); err != nil {
						d.Fatalf(t, "day: %v", err)
					}
				}
				if err := json.Unmarshal([]byte(d.Input), &cfg); err != nil {
					return "json: " + err.Error()
				}
				if err := cfg.Validate(func(c string) bool { return c == "STANDARD_IA" || c == "GLACIER_IR" || c == "ONEZONE_IA" }); err != nil {
					return err.Error()
				}
				return "ok"
			case "decide":
				o := Object{Key: args["key"], Modified: ts("modified"), Class: args["class"]}
				if v := args["size"]; v != "" {
					o.Size, _ = strconv.ParseInt(v, 10, 64)
				}
				if v := args["tags"]; v != "" {
					o.Tags = map[string]string{}
					for _, kv := range strings.Split(v, ",") {
						k, val, _ := strings.Cut(kv, ":")
						o.Tags[k] = val
					}
				}
				now := ts("now")
				a := cfg.Decide(o, now, day)
				if a.Kind == None {
					next, rule := cfg.NextDue(o, now, day)
					if next.IsZero() {
						return "none"
					}
					return fmt.Sprintf("none (next %s by %s)", next.Format(time.RFC3339), rule)
				}
				if a.Kind == Expire {
					return fmt.Sprintf("expire by %s (due %s)", a.Rule, a.Due.Format(time.RFC3339))
				}
				return fmt.Sprintf("transition to %s by %s (due %s)", a.Class, a.Rule, a.Due.Format(time.RFC3339))
			case "noncurrent":
				o := Object{Key: args["key"]}
				if v := args["size"]; v != "" {
					o.Size, _ = strconv.ParseInt(v, 10, 64)
				}
				ok, rule := cfg.DecideNoncurrent(o, ts("since"), ts("now"), day)
				if !ok {
					return "keep"
				}
				return "remove by " + rule
			case "marker":
				ok, rule := cfg.DecideLoneMarker(args["key"])
				if !ok {
					return "keep"
				}
				return "remove by " + rule
			case "upload":
				abort, rule := cfg.DecideUpload(args["key"], ts("initiated"), ts("now"), day)
				if !abort {
					return "keep"
				}
				return "abort by " + rule
			}
			d.Fatalf(t, "unknown command %s", d.Cmd)
			return ""
		})
	})
}

// TestDecideProperties checks, on random rule sets and objects, that
// decisions are monotone in time (once an expiration is due it stays due;
// Decide never answers a transition to the object's own class) and that
// NextDue is when Decide first changes its answer.
func TestDecideProperties(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 9))
	classes := []string{"STANDARD_IA", "GLACIER_IR", "ONEZONE_IA"}
	base := time.Date(2026, 3, 4, 15, 16, 17, 0, time.UTC)
	for i := 0; i < 500; i++ {
		var cfg Config
		for j := 0; j < 1+r.IntN(3); j++ {
			rule := Rule{ID: fmt.Sprint("r", j), Enabled: r.IntN(5) > 0, Prefix: []string{"", "a", "ab"}[r.IntN(3)]}
			if r.IntN(2) == 0 {
				rule.Expiration = &Expiration{Days: 40 + r.IntN(60)}
			}
			for _, c := range classes[:r.IntN(3)] {
				rule.Transition = append(rule.Transition, Transition{Days: 1 + r.IntN(39), Class: c})
			}
			if rule.Expiration == nil && len(rule.Transition) == 0 {
				rule.AbortDays = 1
			}
			cfg.Rules = append(cfg.Rules, rule)
		}
		o := Object{Key: []string{"a", "ab", "b"}[r.IntN(3)], Modified: base.Add(time.Duration(r.IntN(1000)) * time.Minute),
			Class: []string{"", "STANDARD_IA", "GLACIER_IR"}[r.IntN(3)]}
		expiredAt := time.Time{}
		prev := Action{}
		for day := 0; day < 120; day++ {
			now := base.Add(time.Duration(day) * 24 * time.Hour)
			a := cfg.Decide(o, now, 0)
			if a.Kind == TransitionTo && (a.Class == o.Class || (o.Class == "" && a.Class == "STANDARD")) {
				t.Fatalf("seed %d: transition to the object's own class %s", seed, a.Class)
			}
			if a.Kind == Expire && expiredAt.IsZero() {
				expiredAt = now
			}
			if !expiredAt.IsZero() && a.Kind != Expire {
				t.Fatalf("seed %d: expired at %s, not at %s", seed, expiredAt, now)
			}
			if a.Kind != None && a.Due.After(now) {
				t.Fatalf("seed %d: action due %s decided at %s", seed, a.Due, now)
			}
			if a != prev && prev.Kind == None && day > 0 {
				// The change must have been announced by NextDue the day before.
				next, _ := cfg.NextDue(o, now.Add(-24*time.Hour), 0)
				if next.IsZero() || next.After(now) {
					t.Fatalf("seed %d: %+v at %s not announced (next due %s)", seed, a, now, next)
				}
			}
			prev = a
		}
	}
}
