package nemesis

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

func cluster(nodes, members int) Cluster {
	c := Cluster{Devices: []string{"ssd0", "hdd0", "hdd1"}}
	for i := 1; i <= nodes; i++ {
		c.Nodes = append(c.Nodes, fmt.Sprintf("n%d", i))
		if i <= members {
			c.Members = append(c.Members, fmt.Sprintf("n%d", i))
		}
	}
	return c
}

// TestDataDriven runs testdata/ scenarios:
//
//	plan nodes=N members=M events=E seed=S [kinds=a,b] [max-impaired=K] [interval=D]
//
// prints the schedule, the envelope check, the peak impairment and the
// counts by kind. Rewrite with -rewrite.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			args := map[string]string{}
			for _, a := range d.CmdArgs {
				args[a.Key] = strings.Join(a.Vals, ",")
			}
			atoi := func(k string, def int) int {
				if v, ok := args[k]; ok {
					n, err := strconv.Atoi(v)
					if err != nil {
						d.Fatalf(t, "%s: %v", k, err)
					}
					return n
				}
				return def
			}
			if d.Cmd != "plan" {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			c := cluster(atoi("nodes", 5), atoi("members", 3))
			o := Options{Events: atoi("events", 20), MaxImpairedNodes: atoi("max-impaired", 0)}
			if v, ok := args["interval"]; ok {
				iv, err := time.ParseDuration(v)
				if err != nil {
					d.Fatalf(t, "%v", err)
				}
				o.Interval = iv
			}
			kinds, err := ParseKinds(args["kinds"])
			if err != nil {
				return "error: " + err.Error()
			}
			o.Kinds = kinds
			evs, err := Plan(c, o, uint64(atoi("seed", 1)))
			if err != nil {
				return "error: " + err.Error()
			}
			return printSchedule(c, o, evs)
		})
	})
}

func printSchedule(c Cluster, o Options, evs []Event) string {
	var b strings.Builder
	for _, e := range evs {
		b.WriteString(e.String() + "\n")
	}
	if v := Check(c, o, evs); len(v) > 0 {
		b.WriteString("check: " + strings.Join(v, "; ") + "\n")
	} else {
		b.WriteString("check: ok\n")
	}
	n, m := Peak(c, o, evs)
	fmt.Fprintf(&b, "peak: nodes=%d members=%d\n", n, m)
	counts := Counts(evs)
	var parts []string
	for _, k := range Kinds {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, counts[k]))
		}
	}
	b.WriteString("counts: " + strings.Join(parts, " ") + "\n")
	return b.String()
}

var seedFlag = flag.Uint64("seed", 0, "first seed of the property test (0: random)")

// TestSchedulesKeepTheEnvelope: every schedule, for any seed and cluster
// shape, passes Check, never impairs more than the limits at once, heals
// every fault, and is the same when planned again from its seed.
func TestSchedulesKeepTheEnvelope(t *testing.T) {
	seed0 := *seedFlag
	if seed0 == 0 {
		seed0 = rand.Uint64()
	}
	for i := uint64(0); i < 60; i++ {
		seed := seed0 + i
		nodes := 3 + int(seed%5)
		members := 3
		if nodes >= 5 && seed%2 == 0 {
			members = 5
		}
		c := cluster(nodes, members)
		o := Options{Events: 150, MaxImpairedNodes: 1 + int(seed%uint64(min(2, nodes-1)))}
		evs, err := Plan(c, o, seed)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		fail := func(format string, args ...any) {
			t.Fatalf("seed %d (%d nodes, %d members; replay: go test ./internal/chaos/nemesis -run Envelope -seed %d):\n%s\n%s",
				seed, nodes, members, seed, fmt.Sprintf(format, args...), printSchedule(c, o, evs))
		}
		if len(evs) != o.Events {
			fail("%d events, want %d", len(evs), o.Events)
		}
		if v := Check(c, o, evs); len(v) > 0 {
			fail("envelope: %v", v)
		}
		if n, m := Peak(c, o, evs); n > o.MaxImpairedNodes || m > 1 {
			fail("peak %d nodes, %d members", n, m)
		}
		again, _ := Plan(c, o, seed)
		if !reflect.DeepEqual(evs, again) {
			fail("not reproducible from its seed")
		}
	}
}

// TestCheckCatchesViolations: two members down at once, or one node
// faulted twice, are reported.
func TestCheckCatchesViolations(t *testing.T) {
	c := cluster(5, 3)
	o := Options{}
	bad := [][]Event{
		{{Seq: 1, Kind: Kill, Node: "n1", Duration: time.Second}, {Seq: 2, At: time.Second, Kind: Pause, Node: "n2", Duration: time.Second}},
		{{Seq: 1, Kind: Kill, Role: RoleEtcdLeader, Duration: time.Second}, {Seq: 2, At: time.Second, Kind: Isolate, Node: "n3", Duration: time.Second}},
		{{Seq: 1, Kind: Kill, Node: "n4", Duration: time.Second}, {Seq: 2, At: time.Second, Kind: DiskEIO, Node: "n4", Device: "ssd0", Duration: time.Second}},
		{{Seq: 1, Kind: Kill, Node: "n4", Duration: time.Second}, {Seq: 2, Kind: Kill, Node: "n5", Duration: time.Second}, {Seq: 3, Kind: Pause, Node: "n3", Duration: time.Second}},
		{{Seq: 1, Kind: Partition, Sides: [2][]string{{"n1", "n4", "n5"}, {"n2", "n3"}}, Duration: time.Second}},
		{{Seq: 1, Kind: Delay, Node: "n1"}},
	}
	for i, evs := range bad {
		if v := Check(c, o, evs); len(v) == 0 {
			t.Errorf("case %d: schedule %v passed the check", i, evs)
		}
	}
}
