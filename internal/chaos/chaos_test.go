package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/terrace-storage/terrace/internal/chaos/history"
	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
	"github.com/terrace-storage/terrace/internal/chaos/proxy"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

func TestCombineFaults(t *testing.T) {
	l := proxy.Link{From: "n1", To: "n2"}
	got := combine([]map[proxy.Link]proxy.Fault{
		{l: {Delay: 50e6}},
		{l: {DropRate: 0.3, Delay: 20e6}},
	})
	if got[l] != (proxy.Fault{Delay: 50e6, DropRate: 0.3}) {
		t.Fatalf("delays and drops: %+v", got[l])
	}
	got = combine([]map[proxy.Link]proxy.Fault{{l: {Delay: 50e6}}, {l: {Blackhole: true}}, {l: {Cut: true}}})
	if got[l] != (proxy.Fault{Cut: true}) {
		t.Fatalf("a cut wins: %+v", got[l])
	}
	got = combine([]map[proxy.Link]proxy.Fault{{l: {Delay: 50e6}}, {l: {Blackhole: true}}})
	if got[l] != (proxy.Fault{Blackhole: true}) {
		t.Fatalf("a blackhole beats a delay: %+v", got[l])
	}
}

// TestIdentifyRaftSender: the raft proxy names the sender from the
// advertised peer URLs, and learns member IDs for requests that carry
// only X-Server-From.
func TestIdentifyRaftSender(t *testing.T) {
	tp := &topology{urlOwner: map[string]string{"http://127.0.0.1:4001": "n1", "http://127.0.0.1:4002": "n2"}, idOwner: map[string]string{}}
	h := http.Header{}
	h.Set("X-PeerURLs", "http://127.0.0.1:4002")
	h.Set("X-Server-From", "abc123")
	if got := tp.identify(h); got != "n2" {
		t.Fatalf("by URL: %q", got)
	}
	h2 := http.Header{}
	h2.Set("X-Server-From", "abc123")
	if got := tp.identify(h2); got != "n2" {
		t.Fatalf("by learned ID: %q", got)
	}
	if got := tp.identify(http.Header{}); got != "" {
		t.Fatalf("no headers: %q", got)
	}
}

func TestOutcomeClassification(t *testing.T) {
	resp := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}}, Err: errors.New("x")}}
	}
	for _, tc := range []struct {
		err  error
		want history.Outcome
	}{
		{nil, history.OK},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), history.Fail},
		{resp(404), history.Fail},
		{resp(400), history.Fail},
		{resp(500), history.Unknown},
		{resp(503), history.Unknown},
		{context.DeadlineExceeded, history.Unknown},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), history.Unknown},
	} {
		if got, _ := outcome(tc.err); got != tc.want {
			t.Errorf("outcome(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestVectorProblem(t *testing.T) {
	want := model.MustParseVector("any=3")
	up := map[model.NodeID]bool{"n1": true, "n2": true, "n3": true, "n4": false}
	rep := func(dev string, node model.NodeID, bad bool) meta.EgroupReplica {
		return meta.EgroupReplica{Device: model.DeviceID(dev), Node: node, Bad: bad}
	}
	loc := func(rs ...meta.EgroupReplica) object.Location {
		return object.Location{Extents: []object.ExtentLocation{{Extent: 1, Egroup: 9, Replicas: rs}}}
	}
	if p := vectorProblem(loc(rep("n1/ssd0", "n1", false), rep("n2/hdd0", "n2", false), rep("n3/hdd1", "n3", false)), want, up); p != "" {
		t.Fatalf("healthy object: %s", p)
	}
	for name, l := range map[string]object.Location{
		"bad replica": loc(rep("n1/ssd0", "n1", false), rep("n2/hdd0", "n2", true), rep("n3/hdd1", "n3", false)),
		"node down":   loc(rep("n1/ssd0", "n1", false), rep("n2/hdd0", "n2", false), rep("n4/hdd1", "n4", false)),
		"too few":     loc(rep("n1/ssd0", "n1", false), rep("n2/hdd0", "n2", false)),
		"surplus":     loc(rep("n1/ssd0", "n1", false), rep("n2/hdd0", "n2", false), rep("n3/hdd1", "n3", false), rep("n3/hdd0", "n3", true)),
		"dangling":    {Extents: []object.ExtentLocation{{Extent: 1, Error: "extent record: not found"}}},
	} {
		if p := vectorProblem(l, want, up); p == "" {
			t.Errorf("%s: no problem reported", name)
		}
	}
}

// TestAvailabilityAndTimeline: operations are attributed to the faults in
// force when invoked (and to the recovery window after a disruptive one),
// and the timeline plot is a PNG.
func TestAvailabilityAndTimeline(t *testing.T) {
	s := int64(1e9)
	ops := []history.Op{
		{Kind: history.Put, Call: 1 * s, Return: 1*s + 1e7, Outcome: history.OK},
		{Kind: history.Get, Call: 11 * s, Return: 12 * s, Outcome: history.Unknown},
		{Kind: history.Get, Call: 12 * s, Return: 12*s + 2e7, Outcome: history.OK},
		{Kind: history.Get, Call: 25 * s, Return: 25*s + 3e7, Outcome: history.OK},
		{Kind: history.Get, Call: 60 * s, Return: 60*s + 1e7, Outcome: history.OK},
		{Kind: history.Get, Call: 61 * s, Return: 61*s + 1e7, Outcome: history.OK, Final: true},
	}
	ops[1].Node, ops[2].Node = "n2", "n1"
	evs := []Executed{{Event: nemesis.Event{Kind: nemesis.Kill}, Start: 10, Healed: 15, Ready: 20, Affected: []string{"n2"}}}
	byFault := map[string]Availability{}
	for _, a := range availability(ops, evs) {
		byFault[a.Fault] = a
	}
	if a := byFault["kill"]; a.Ops != 2 || a.OK != 0.5 || a.OKElsewhere != 1 {
		t.Errorf("kill: %+v", a)
	}
	if a := byFault["recovery"]; a.Ops != 1 || a.OK != 1 {
		t.Errorf("recovery: %+v", a)
	}
	if a := byFault["none"]; a.Ops != 2 {
		t.Errorf("none: %+v (final reads must not count)", a)
	}
	path := filepath.Join(t.TempDir(), "timeline.png")
	if err := plotTimeline(path, ops, evs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Fatalf("timeline: %v, %d bytes", err, len(b))
	}
}

// TestTopologyWiring: every node dials each peer's replica RPC through its
// own proxy, reaches its own etcd member directly and the others through
// proxies, and members advertise their raft proxies.
func TestTopologyWiring(t *testing.T) {
	o := Options{Nodes: 4, Members: 3}
	dc := devcluster.Options{BasePort: 30000}
	tp, err := newTopology(&o, &dc)
	if err != nil {
		t.Fatal(err)
	}
	defer tp.net.Close()
	if eps := dc.MetaEndpoints(0); len(eps) != 3 || eps[0] != "http://127.0.0.1:30003" {
		t.Fatalf("member n1's endpoints %v: want its own client URL first, then 2 proxies", eps)
	}
	if eps := dc.MetaEndpoints(3); len(eps) != 3 || strings.Contains(strings.Join(eps, ","), ":300") {
		t.Fatalf("client n4's endpoints %v: want 3 proxies", eps)
	}
	args := strings.Join(dc.NodeArgs(1), " ")
	for _, peer := range []string{"n1=", "n3=", "n4="} {
		if !strings.Contains(args, peer) {
			t.Fatalf("n2's args %q lack an override for %s", args, peer)
		}
	}
	if strings.Contains(args, "n2=") {
		t.Fatalf("n2 overrides itself: %q", args)
	}
	u := dc.AdvertisePeerURL(2)
	if h := (http.Header{"X-Peerurls": {u}}); tp.identify(h) != "n3" {
		t.Fatalf("raft URL %s does not identify n3", u)
	}
	if got := len(tp.net.Stats()); got != 0 {
		t.Fatalf("%d links used before any traffic", got)
	}
}
