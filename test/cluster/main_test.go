package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

var (
	long       = flag.Bool("long", false, "run the long scenarios (6,000 objects under kill -9)")
	terraceBin string
	keepDir    = flag.Bool("keep", false, "keep cluster data directories (for debugging)")
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "terrace-cluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	terraceBin = filepath.Join(dir, "terrace")
	start := time.Now()
	cmd := exec.Command("go", "build", "-o", terraceBin, "github.com/terrace-storage/terrace/cmd/terrace")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building terrace:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "built %s in %s\n", terraceBin, time.Since(start).Round(time.Millisecond))
	if sourceDirs, err = listSourceDirs(); err != nil {
		fmt.Fprintln(os.Stderr, "go list:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sourceDirs are the module's package directories the terrace binary is
// built from.
var sourceDirs []string

// listSourceDirs finds them with `go list -deps`.
func listSourceDirs() ([]string, error) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}",
		"github.com/terrace-storage/terrace/cmd/terrace").Output()
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// noTestCache opens every source directory of the binary. These tests run
// a binary built from the whole tree, much of which (cmd/terrace, the S3
// gateway) this package does not import; `go test` records the opened
// directories and reruns the tests, instead of replaying a cached PASS,
// when a file in any of them changes.
func noTestCache() {
	for _, d := range sourceDirs {
		if f, err := os.Open(d); err == nil {
			f.Close()
		}
	}
}

// testCluster is a running devcluster plus the test's helpers.
type testCluster struct {
	t *testing.T
	*devcluster.Cluster
	dir string
}

// startCluster starts n nodes. base is the test's preferred port block;
// if another process holds a port there, the next free block above it
// (in steps of 500) is used. curatorYAML, if set, is written as the nodes'
// config file (a `curator:` section).
func startCluster(t *testing.T, n, base int, curatorYAML string) *testCluster {
	t.Helper()
	return startClusterWith(t, n, base, curatorYAML, nil)
}

// startClusterWith is startCluster with a last word on the options.
func startClusterWith(t *testing.T, n, base int, curatorYAML string, mod func(*devcluster.Options)) *testCluster {
	t.Helper()
	noTestCache()
	dir := t.TempDir()
	if *keepDir {
		var err error
		dir, err = os.MkdirTemp("", "terrace-"+strings.ReplaceAll(t.Name(), "/", "_")+"-")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("data under %s", dir)
	}
	chosen, err := devcluster.FreeBase(base, 10*n, 500)
	if err != nil {
		t.Fatal(err)
	}
	o := devcluster.Options{
		Binary: terraceBin, Dir: dir, Nodes: n, BasePort: chosen, Emulate: false,
		Devices: []string{"ssd:ssd0:2GiB", "hdd:hdd0:8GiB", "hdd:hdd1:8GiB"},
	}
	if curatorYAML != "" {
		p := filepath.Join(dir, "terrace.yaml")
		if err := os.WriteFile(p, []byte(curatorYAML), 0o644); err != nil {
			t.Fatal(err)
		}
		o.ExtraArgs = []string{"--config", p}
	}
	if mod != nil {
		mod(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	c, err := devcluster.Start(ctx, o)
	if err != nil {
		t.Fatalf("start cluster: %v", err)
	}
	tc := &testCluster{t: t, Cluster: c, dir: dir}
	t.Cleanup(func() {
		c.Stop()
		if t.Failed() {
			tc.dumpLogs()
		}
	})
	t.Logf("%d-node cluster up in %s (ports %d..)", n, time.Since(start).Round(time.Millisecond), chosen)
	if !o.TLS { // the helpers below speak plain HTTP; TLS tests check for themselves
		tc.waitAllUp(60 * time.Second)
	}
	return tc
}

// dumpLogs prints the tail of every node's log.
func (c *testCluster) dumpLogs() {
	for _, n := range c.Nodes {
		b, err := os.ReadFile(n.LogPath)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 40 {
			lines = lines[len(lines)-40:]
		}
		c.t.Logf("---- %s log tail (%s) ----\n%s", n.ID, n.LogPath, strings.Join(lines, "\n"))
	}
}

// node returns a node by ID.
func (c *testCluster) node(id string) *devcluster.Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

var httpc = &http.Client{
	Timeout: 60 * time.Second,
	Transport: &adminauth.Transport{AccessKey: devcluster.AccessKey, SecretKey: devcluster.SecretKey,
		Base: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}},
}

// apiErr is a non-2xx admin API answer.
type apiErr struct {
	Status int
	Body   string
}

func (e *apiErr) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(e.Body))
}

// call does one admin API request and decodes a JSON answer into out.
func call(ctx context.Context, method, admin, path string, body []byte, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+admin+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.ContentLength = int64(len(body))
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return &apiErr{Status: resp.StatusCode, Body: string(b)}
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func ctxT(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func createBucket(t *testing.T, admin, bucket, vector string) {
	t.Helper()
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()
	if err := call(ctx, "PUT", admin, "/v1/buckets/"+bucket+"?vector="+url.QueryEscape(vector), nil, nil); err != nil {
		t.Fatalf("create bucket %s on %s: %v", bucket, admin, err)
	}
}

func putObject(ctx context.Context, admin, bucket, key string, data []byte) error {
	return call(ctx, "PUT", admin, "/v1/data/"+bucket+"/"+key, data, nil)
}

func getObject(ctx context.Context, admin, bucket, key string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+admin+"/v1/data/"+bucket+"/"+key, nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if resp.StatusCode != 200 {
		return nil, &apiErr{Status: resp.StatusCode, Body: string(b)}
	}
	if cl := resp.ContentLength; cl >= 0 && int64(len(b)) != cl {
		return nil, fmt.Errorf("short body: %d of %d bytes", len(b), cl)
	}
	return b, nil
}

func deleteObject(ctx context.Context, admin, bucket, key string) error {
	return call(ctx, "DELETE", admin, "/v1/data/"+bucket+"/"+key, nil, nil)
}

func locate(ctx context.Context, admin, bucket, key string) (object.Location, error) {
	var loc object.Location
	err := call(ctx, "GET", admin, "/v1/object/locate?bucket="+url.QueryEscape(bucket)+"&key="+url.QueryEscape(key), nil, &loc)
	return loc, err
}

func nodeStatus(ctx context.Context, admin string) (server.Status, error) {
	var st server.Status
	err := call(ctx, "GET", admin, "/v1/status", nil, &st)
	return st, err
}

func curatorHistory(ctx context.Context, admin string, n int) ([]curator.JobRecord, error) {
	var h []curator.JobRecord
	err := call(ctx, "GET", admin, fmt.Sprintf("/v1/curator/history?n=%d", n), nil, &h)
	return h, err
}

func curatorRun(ctx context.Context, admin, kind string) (curator.JobRecord, error) {
	var rec curator.JobRecord
	err := call(ctx, "POST", admin, "/v1/curator/run?wait=1&kind="+kind, nil, &rec)
	return rec, err
}

// nodeUp reports whether admin's cluster view shows node id up.
func nodeUp(ctx context.Context, admin, id string) (bool, error) {
	st, err := nodeStatus(ctx, admin)
	if err != nil {
		return false, err
	}
	if st.Cluster == nil {
		return false, fmt.Errorf("%s: no cluster status", admin)
	}
	for _, n := range st.Cluster.Nodes {
		if string(n.ID) == id {
			return n.Up, nil
		}
	}
	return false, nil
}

// waitAllUp waits until every running node sees every node up.
func (c *testCluster) waitAllUp(d time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for _, viewer := range c.Nodes {
		for _, n := range c.Nodes {
			for {
				ctx, cancel := ctxT(5 * time.Second)
				up, err := nodeUp(ctx, viewer.Admin, n.ID)
				cancel()
				if err == nil && up {
					break
				}
				if time.Now().After(deadline) {
					c.t.Fatalf("%s does not see %s up after %s (err %v)", viewer.ID, n.ID, d, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
}

// waitNodeState waits until viewer sees node id up (or down).
func waitNodeState(t *testing.T, viewer, id string, up bool, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ctx, cancel := ctxT(5 * time.Second)
		got, err := nodeUp(ctx, viewer, id)
		cancel()
		if err == nil && got == up {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: node %s up=%v not seen within %s (last err %v)", viewer, id, up, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// etcdLeader returns the node whose embedded etcd member leads, as the
// viewer's status reports it.
func etcdLeader(ctx context.Context, viewer string) (string, error) {
	st, err := nodeStatus(ctx, viewer)
	if err != nil {
		return "", err
	}
	if st.Cluster == nil {
		return "", fmt.Errorf("no cluster status")
	}
	for _, m := range st.Cluster.Members {
		if m.Leader {
			return m.Name, nil
		}
	}
	return "", fmt.Errorf("no leader in %+v", st.Cluster.Members)
}

// Deterministic object content: the size (log-uniform between min and
// max) and the bytes are functions of seed and key alone, so a reader can
// check any object without keeping a copy.

func keySeed(seed uint64, key string) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(key))
	return h.Sum64()
}

func content(seed uint64, key string, minSize, maxSize int) []byte {
	s := keySeed(seed, key)
	r := rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
	size := minSize
	if maxSize > minSize {
		lo, hi := math.Log(float64(minSize)), math.Log(float64(maxSize))
		size = int(math.Exp(lo + r.Float64()*(hi-lo)))
		size = max(minSize, min(maxSize, size))
	}
	var key32 [32]byte
	binary.LittleEndian.PutUint64(key32[:], s)
	binary.LittleEndian.PutUint64(key32[8:], uint64(size))
	cc := rand.NewChaCha8(key32)
	b := make([]byte, size)
	cc.Read(b)
	return b
}

// firstDiff describes where got and want differ.
func firstDiff(got, want []byte) string {
	if len(got) != len(want) {
		return fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at byte %d", i)
		}
	}
	return "identical"
}

// ackSet records acknowledged writes.
type ackSet struct {
	mu   sync.Mutex
	keys map[string]time.Time
}

func newAckSet() *ackSet { return &ackSet{keys: map[string]time.Time{}} }

func (a *ackSet) add(k string) {
	a.mu.Lock()
	a.keys[k] = time.Now()
	a.mu.Unlock()
}

func (a *ackSet) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.keys)
}

func (a *ackSet) list() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, 0, len(a.keys))
	for k := range a.keys {
		out = append(out, k)
	}
	return out
}

func (a *ackSet) ackedAt(k string) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.keys[k]
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
