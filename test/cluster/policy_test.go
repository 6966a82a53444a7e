package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/policy"
	"github.com/terrace-storage/terrace/internal/server"
)

// cli runs the terrace binary against a node's admin API.
func cli(t *testing.T, n *devcluster.Node, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := ctxT(60 * time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, terraceBin, append(args, "--endpoint", "http://"+n.Admin)...)
	cmd.Env = append(cmd.Environ(), "TERRACE_ACCESS_KEY="+devcluster.AccessKey, "TERRACE_SECRET_KEY="+devcluster.SecretKey)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func examplePolicy(name string) string {
	return filepath.Join("..", "..", "examples", "policies", name)
}

// policyList is GET /v1/policies on a node.
func policyList(ctx context.Context, admin string) (server.PolicyList, error) {
	var l server.PolicyList
	err := call(ctx, "GET", admin, "/v1/policies", nil, &l)
	return l, err
}

// waitPolicy waits until admin runs version v of name; it returns how
// long that took.
func waitPolicy(t *testing.T, admin, name string, v int64, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := ctxT(5 * time.Second)
		l, err := policyList(ctx, admin)
		cancel()
		if err == nil {
			for _, p := range l.Policies {
				if p.Name == name && p.Version == v && p.Running == v {
					return time.Since(start)
				}
			}
		}
		if time.Since(start) > d {
			t.Fatalf("%s: %s version %d not running after %s (last: %+v, %v)", admin, name, v, d, l.Policies, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPoliciesOnThreeNodes is the policy acceptance run on a real 3-node
// dev cluster: propagation, object classes under concurrency, rejection
// of sandbox escapes and runaway loops with every node still serving, and
// a balancer swapped live moving the Curator's scan partitions.
func TestPoliciesOnThreeNodes(t *testing.T) {
	c := startCluster(t, 3, 27600, "")
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]

	t.Run("put on n1 is live on n3 within a second", func(t *testing.T) {
		out, errOut, err := cli(t, n1, "policy", "put", "spread", examplePolicy("rule_spread_racks.lua"))
		if err != nil {
			t.Fatalf("put: %v\n%s%s", err, out, errOut)
		}
		took := waitPolicy(t, n3.Admin, "spread", 1, 5*time.Second)
		t.Logf("rule live on n3 %s after the put returned on n1", took)
		if took > time.Second {
			t.Fatalf("propagation took %s, want under 1 s", took)
		}
		out, _, err = cli(t, n3, "policy", "ls")
		if err != nil || !strings.Contains(out, "spread") || !strings.Contains(out, "rule") {
			t.Fatalf("n3 policy ls: %v\n%s", err, out)
		}
		ctx, cancel := ctxT(10 * time.Second)
		defer cancel()
		req, _ := httpRequest(ctx, "GET", "http://"+n3.Admin+"/metrics", nil)
		resp, err := httpc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `terrace_policy_version{hook="rule",policy="spread"} 1`) {
			t.Fatalf("n3 metrics lack the running version:\n%s", grepLines(string(b), "terrace_policy"))
		}
	})

	t.Run("counter.incr from two clients 100 times each ends at 200", func(t *testing.T) {
		if out, errOut, err := cli(t, n1, "policy", "put", "counter", examplePolicy("counter.lua")); err != nil {
			t.Fatalf("put counter: %v\n%s%s", err, out, errOut)
		}
		waitPolicy(t, n3.Admin, "counter", 1, 5*time.Second)
		createBucket(t, n1.Admin, "classes", "any=2")
		var wg sync.WaitGroup
		var mu sync.Mutex
		ranOn := map[string]int{}
		attempts := 0
		errs := make(chan error, 2)
		for _, n := range []*devcluster.Node{n1, n3} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 100; i++ {
					ctx, cancel := ctxT(30 * time.Second)
					var res policy.ExecResult
					err := call(ctx, "POST", n.Admin, "/v1/object/exec?bucket=classes&key=visits&method=counter.incr", nil, &res)
					cancel()
					if err != nil {
						errs <- fmt.Errorf("client on %s, call %d: %w", n.ID, i, err)
						return
					}
					mu.Lock()
					ranOn[res.Node]++
					attempts += res.Attempts
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		ctx, cancel := ctxT(30 * time.Second)
		defer cancel()
		got, err := getObject(ctx, n2.Admin, "classes", "visits")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != "200" {
			t.Fatalf("counter = %q after 2 × 100 increments", got)
		}
		t.Logf("200 increments ran on %v with %d attempts in all", ranOn, attempts)
		// The CLI prints the method's return value.
		out, errOut, err := cli(t, n2, "object", "exec", "classes/visits", "counter.incr", "5")
		if err != nil || strings.TrimSpace(out) != "205" {
			t.Fatalf("object exec via the CLI: %q %v %s", out, err, errOut)
		}
	})

	t.Run("escapes and runaway loops are rejected at put; every node keeps serving", func(t *testing.T) {
		bad := map[string]string{
			"exec":    "function run(obj)\n  return os.execute('touch /tmp/terrace-pwned')\nend\n",
			"open":    "function fitness(d)\n  local f = io.open('/etc/passwd')\n  return 1\nend\n",
			"require": "local socket = require('socket')\nfunction cost(v) return 0 end\n",
			"forever": "function fitness(d)\n  while true do end\nend\n",
			"spinner": "function when() return true end\nfunction where(nodes)\n  repeat until false\nend\n",
		}
		dir := t.TempDir()
		for name, src := range bad {
			p := filepath.Join(dir, name+".lua")
			if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			out, errOut, err := cli(t, n2, "policy", "put", "bad-"+name, p)
			if err == nil {
				t.Fatalf("%s was accepted: %s", name, out)
			}
			if !strings.Contains(errOut, "PolicyRejected") || !strings.Contains(errOut, ".lua:") {
				t.Fatalf("%s: rejection without the Lua line: %s", name, errOut)
			}
			t.Logf("%s rejected: %s", name, strings.TrimSpace(errOut))
		}
		if _, err := os.Stat("/tmp/terrace-pwned"); err == nil {
			t.Fatal("os.execute ran")
		}
		for i, n := range c.Nodes {
			ctx, cancel := ctxT(30 * time.Second)
			if _, err := nodeStatus(ctx, n.Admin); err != nil {
				cancel()
				t.Fatalf("%s not serving: %v", n.ID, err)
			}
			key := fmt.Sprintf("after-rejects-%d", i)
			data := bytes.Repeat([]byte{byte(i + 1)}, 100_000)
			if err := putObject(ctx, n.Admin, "classes", key, data); err != nil {
				cancel()
				t.Fatalf("%s put: %v", n.ID, err)
			}
			got, err := getObject(ctx, c.Nodes[(i+1)%3].Admin, "classes", key)
			cancel()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s round trip: %v", n.ID, err)
			}
			ctx, cancel = ctxT(10 * time.Second)
			l, err := policyList(ctx, n.Admin)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range l.Policies {
				if strings.HasPrefix(p.Name, "bad-") {
					t.Fatalf("%s lists rejected policy %s", n.ID, p.Name)
				}
			}
		}
	})

	t.Run("a balancer swapped live moves the scan partitions", func(t *testing.T) {
		leader := c.node(c.curatorLeader())
		toNode := func(id string) string {
			return fmt.Sprintf(`-- every partition to %[1]s
function when() return true end
function where(nodes, units, self) return {%[1]s = 1} end
`, id)
		}
		run := func(viaNode *devcluster.Node, target string, wantVersion int64) curatorPartitions {
			t.Helper()
			ctx, cancel := ctxT(30 * time.Second)
			defer cancel()
			var res policy.PutResult
			if err := call(ctx, "PUT", viaNode.Admin, "/v1/policies/mantle?hook=balancer&author=test", []byte(toNode(target)), &res); err != nil {
				t.Fatalf("put balancer -> %s: %v", target, err)
			}
			if res.Record.Version != wantVersion {
				t.Fatalf("balancer version %d, want %d", res.Record.Version, wantVersion)
			}
			waitPolicy(t, leader.Admin, "mantle", wantVersion, 5*time.Second)
			rec, err := curatorRun(ctx, leader.Admin, "partial")
			if err != nil {
				t.Fatalf("curator run: %v", err)
			}
			return curatorPartitions(rec.Partitions)
		}
		first, second := n2.ID, n3.ID
		if leader.ID == n2.ID {
			first = n1.ID
		}
		p1 := run(n1, first, 1)
		if got := p1.owners(); got != first {
			t.Fatalf("balancer v1 (everything to %s): partitions %v", first, p1)
		}
		p2 := run(n3, second, 2)
		if got := p2.owners(); got != second {
			t.Fatalf("balancer v2 (everything to %s): partitions %v", second, p2)
		}
		t.Logf("leader %s: v1 put every partition on %s, v2 on %s", leader.ID, first, second)
		// Spread over all three: curator status shows each node's share
		// of the map work.
		spread := `-- every node an equal share
function when() return true end
function where(nodes, units, self) return {n1 = 1, n2 = 1, n3 = 1} end
`
		ctx, cancel := ctxT(30 * time.Second)
		var res policy.PutResult
		if err := call(ctx, "PUT", n2.Admin, "/v1/policies/mantle?hook=balancer&author=test", []byte(spread), &res); err != nil {
			cancel()
			t.Fatalf("put spreading balancer: %v", err)
		}
		waitPolicy(t, leader.Admin, "mantle", res.Record.Version, 5*time.Second)
		rec, err := curatorRun(ctx, leader.Admin, "partial")
		if err != nil {
			cancel()
			t.Fatalf("curator run: %v", err)
		}
		var st curator.Status
		err = call(ctx, "GET", leader.Admin, "/v1/curator/status", nil, &st)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		working := 0
		for _, ns := range st.ScanNodes {
			if ns.Partitions > 0 {
				working++
			}
		}
		if working != 3 {
			t.Fatalf("spread balancer: scan nodes %+v (partitions %v), want map work on all 3", st.ScanNodes, rec.Partitions)
		}
		t.Logf("spread: %+v", st.ScanNodes)
		// Removing the balancer returns the scan to the default spread:
		// partitions dealt over every up node by their records.
		if out, errOut, err := cli(t, n2, "policy", "rm", "mantle"); err != nil {
			t.Fatalf("rm: %v %s %s", err, out, errOut)
		}
		quietFull := func(what string) curator.JobRecord {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				ctx, cancel := ctxT(30 * time.Second)
				rec, err := curatorRun(ctx, leader.Admin, "full")
				cancel()
				if err != nil {
					t.Fatal(err)
				}
				done := 0
				for _, n := range rec.Done {
					done += n
				}
				if done == 0 && rec.Stale == 0 && rec.Failed == 0 {
					return rec // a scan that changed nothing: the next one sees the same metadata
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: the Curator never settled: %+v", what, rec)
				}
			}
		}
		// spreadFull runs a full scan with the default spread, retried
		// until it is spread over all three nodes and shuffled (a scan
		// that fell back because a node was slow to answer on a loaded
		// machine is retried until the deadline).
		spreadFull := func() curator.JobRecord {
			t.Helper()
			deadline := time.Now().Add(10 * time.Second)
			for {
				rec := quietFull("default spread")
				if len(curatorPartitions(rec.Partitions).nodes()) == 3 && rec.Shuffle != "" {
					return rec
				}
				if time.Now().After(deadline) {
					t.Fatalf("balancer removed: partitions %v, shuffle %q (abandoned: %q); want the default spread over 3 nodes, shuffled",
						rec.Partitions, rec.Shuffle, rec.ShuffleError)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		aloneFull := func() curator.JobRecord {
			t.Helper()
			ctx, cancel := ctxT(30 * time.Second)
			err := call(ctx, "PUT", n2.Admin, "/v1/policies/mantle?hook=balancer&author=test", []byte(toNode(leader.ID)), &res)
			cancel()
			if err != nil {
				t.Fatalf("put balancer -> master: %v", err)
			}
			waitPolicy(t, leader.Admin, "mantle", res.Record.Version, 5*time.Second)
			rec := quietFull("master alone")
			if got := curatorPartitions(rec.Partitions).owners(); got != leader.ID {
				t.Fatalf("balancer to the master: partitions %v", rec.Partitions)
			}
			if out, errOut, err := cli(t, n2, "policy", "rm", "mantle"); err != nil {
				t.Fatalf("rm: %v %s %s", err, out, errOut)
			}
			return rec
		}
		// The same scan mapped by the master alone finds exactly the same.
		// The nodes may write records between the two scans (access
		// records flushed by the read path, which the Curator does not
		// control): then the record counts differ and the pair is run
		// again. The same record count with different findings is a
		// real difference and fails at once.
		var spread3, alone curator.JobRecord
		deadline := time.Now().Add(30 * time.Second)
		for {
			spread3 = spreadFull()
			alone = aloneFull()
			same := fmt.Sprintf("%+v %v", alone.Stats, alone.Dangling) == fmt.Sprintf("%+v %v", spread3.Stats, spread3.Dangling)
			if alone.Records == spread3.Records && same {
				break
			}
			if alone.Records == spread3.Records || time.Now().After(deadline) {
				t.Fatalf("a scan mapped on 3 nodes differs from the master's own:\n spread: records %d stats %+v dangling %v\n alone:  records %d stats %+v dangling %v",
					spread3.Records, spread3.Stats, spread3.Dangling, alone.Records, alone.Stats, alone.Dangling)
			}
			t.Logf("records changed between the scans (%d spread, %d alone): again", spread3.Records, alone.Records)
		}
		t.Logf("full scan: %d records, %+v, the same mapped on 3 nodes and on the master alone", alone.Records, alone.Stats)

		// A worker killed (-9) while the view still lists it up: its
		// partitions fail there and are mapped by the master; the scan
		// completes and finds what it found before.
		victimNode := n1
		if leader.ID == n1.ID {
			victimNode = n3
		}
		victim := victimNode.ID
		c.Kill(victimNode)
		ctx, cancel = ctxT(60 * time.Second)
		rec, err = curatorRun(ctx, leader.Admin, "full")
		cancel()
		if err != nil {
			t.Fatalf("full scan with worker %s killed: %v", victim, err)
		}
		failed := 0
		for part, who := range rec.Partitions {
			if who == victim {
				t.Fatalf("partition %s credited to the dead worker %s", part, victim)
			}
			if strings.Contains(who, victim+" failed") {
				failed++
			}
		}
		if failed == 0 {
			t.Logf("the view marked %s down before the scan: nothing assigned to it (%v)", victim, rec.Partitions)
		}
		// Records may differ by what the nodes wrote meanwhile (access
		// records flushed as n1 went down), and under-replication by when
		// the view marks the victim down; the data found may not.
		if rec.Stats.Egroups != alone.Stats.Egroups || rec.Stats.LiveBytes != alone.Stats.LiveBytes || rec.Stats.GarbageBytes != alone.Stats.GarbageBytes {
			t.Fatalf("scan with %s killed: records %d stats %+v, want records %d stats %+v", victim, rec.Records, rec.Stats, alone.Records, alone.Stats)
		}
		t.Logf("worker %s killed: scan complete, %d partitions mapped by the master instead (shuffle %q, abandoned: %q)", victim, failed, rec.Shuffle, rec.ShuffleError)
		rctx, rcancel := ctxT(60 * time.Second)
		defer rcancel()
		if err := c.Restart(rctx, victimNode); err != nil {
			t.Fatalf("restart %s: %v", victim, err)
		}
	})
}

// curatorPartitions is a job record's partition → scanner map.
type curatorPartitions map[string]string

// nodes returns the distinct nodes that scanned partitions.
func (p curatorPartitions) nodes() map[string]int {
	seen := map[string]int{}
	for _, n := range p {
		seen[n]++
	}
	return seen
}

// owners returns the single node that scanned every partition, or a
// description of the mix.
func (p curatorPartitions) owners() string {
	seen := map[string]int{}
	for _, n := range p {
		seen[n]++
	}
	if len(seen) == 1 && len(p) > 0 {
		for n := range seen {
			return n
		}
	}
	b, _ := json.Marshal(seen)
	return string(b)
}

func httpRequest(ctx context.Context, method, u string, body io.Reader) (*http.Request, error) {
	if _, err := url.Parse(u); err != nil {
		return nil, err
	}
	return http.NewRequestWithContext(ctx, method, u, body)
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
