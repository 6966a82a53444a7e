// Package tiering tests automatic tiering against a real remote tier: a
// second Terrace instance serving S3. Real processes, loopback only.
package tiering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/devcluster"
	"github.com/terrace-storage/terrace/internal/object"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terrace-tiering")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "terrace")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/terrace").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type proc struct {
	cmd   *exec.Cmd
	admin string
	s3    string
	log   string
}

func start(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	p := &proc{admin: freePort(t), s3: freePort(t), log: filepath.Join(dir, "server.log")}
	os.MkdirAll(dir, 0o755)
	lf, _ := os.Create(p.log)
	p.cmd = exec.Command(bin, append([]string{"server", "--data-dir", dir, "--admin-address", p.admin, "--s3-address", p.s3}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = lf, lf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.cmd.Process.Kill(); p.cmd.Wait(); lf.Close() })
	for i := 0; i < 200; i++ {
		if resp, err := adminc.Get("http://" + p.admin + "/v1/status"); err == nil {
			resp.Body.Close()
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(p.log)
	t.Fatalf("server did not start:\n%s", b)
	return nil
}

// adminc signs admin API requests with the nodes' (default) root keys.
var adminc = devcluster.AdminClient(60 * time.Second)

func (p *proc) call(t *testing.T, method, path string, body []byte, out any) int {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+p.admin+path, bytes.NewReader(body))
	resp, err := adminc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			if bp, ok := out.(*[]byte); ok {
				*bp = b
			} else {
				t.Fatalf("%s %s: %v: %s", method, path, err, b)
			}
		}
	}
	return resp.StatusCode
}

func payload(i int) []byte {
	r := rand.New(rand.NewPCG(uint64(i), 5))
	b := make([]byte, 300<<10)
	for j := range b {
		b[j] = byte(r.Uint32())
	}
	return b
}

func (p *proc) tiers(t *testing.T, key string) map[string]int {
	var loc object.Location
	if st := p.call(t, "GET", "/v1/object/locate?bucket=tier&key="+key, nil, &loc); st != 200 {
		t.Fatalf("locate %s: %d", key, st)
	}
	out := map[string]int{}
	for k, v := range loc.Tiers {
		out[string(k)] = v
	}
	return out
}

func (p *proc) read(t *testing.T, key string, want []byte) error {
	resp, err := adminc.Get("http://" + p.admin + "/v1/data/tier/" + key)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("%s: WRONG BYTES", key)
	}
	return nil
}

// TestRemoteTierDemotePromoteRecall fills a node's hdd tier past f and
// checks: cold replicas are demoted to the remote tier (another Terrace),
// objects still read back; an access burst promotes a remote-only object;
// `tier recall` brings a prefix back; and losing the remote loses no object
// that kept a local replica.
func TestRemoteTierDemotePromoteRecall(t *testing.T) {
	dir := t.TempDir()
	remote := start(t, filepath.Join(dir, "remote"), "--device", "hdd:"+filepath.Join(dir, "remote", "hdd0")+":2GiB", "--default-vector", "any=1")
	cfg := filepath.Join(dir, "local.yaml")
	os.WriteFile(cfg, []byte(`curator:
  partial_every: 1h
  full_every: 1h
  tier_check_interval: 1h
  promote_reads: 2
  hot_window: 10m
  scrub: false
  seal_idle: 1ns
`), 0o644)
	ld := filepath.Join(dir, "local")
	local := start(t, ld, "--config", cfg,
		"--device", "hdd:"+filepath.Join(ld, "hdd0")+":24MiB", "--device", "hdd:"+filepath.Join(ld, "hdd1")+":24MiB",
		"--device", "remote:http://terrace:terrace-secret@"+remote.s3+"/cold/node1:1GiB")
	if st := local.call(t, "PUT", "/v1/buckets/tier", nil, nil); st != 200 {
		t.Fatalf("create bucket: %d", st)
	}
	// 8 objects with one replica (the coldest), then 60 with two: ~80 %
	// of the hdd tier.
	n2, n1 := 60, 8
	for i := 0; i < n2+n1; i++ {
		v := "any=2"
		if i < n1 {
			v = "any=1"
		}
		if st := local.call(t, "PUT", fmt.Sprintf("/v1/data/tier/k%03d?vector=%s", i, v), payload(i), nil); st != 200 {
			var rep []byte
			local.call(t, "GET", "/v1/tier/report", nil, &rep)
			t.Fatalf("put %d: %d\n%s", i, st, rep)
		}
	}
	var rec struct {
		Done   map[string]int `json:"tasks_done"`
		Failed int            `json:"tasks_failed"`
		Errors []string       `json:"errors"`
	}
	// A partial scan seals idle egroups only after a minute by default;
	// ask for a full run twice (seal, then tier).
	for i := 0; i < 2; i++ {
		local.call(t, "POST", "/v1/curator/run?kind=partial&wait=1", nil, &rec)
	}
	var policy map[string]any
	local.call(t, "GET", "/v1/tier/policy", nil, &policy)
	onRemote := 0
	var remoteOnly []int
	for i := 0; i < n2+n1; i++ {
		tr := local.tiers(t, fmt.Sprintf("k%03d", i))
		if tr["remote"] > 0 {
			onRemote++
			if tr["hdd"] == 0 {
				remoteOnly = append(remoteOnly, i)
			}
		}
		if err := local.read(t, fmt.Sprintf("k%03d", i), payload(i)); err != nil {
			t.Fatalf("read k%03d after demotion: %v", i, err)
		}
	}
	t.Logf("demoted: %d objects have a remote replica, %d only remote; last job %v failed %d errors %v", onRemote, len(remoteOnly), rec.Done, rec.Failed, rec.Errors)
	if onRemote == 0 {
		for i := 0; i < n2+n1; i++ {
			var loc object.Location
			local.call(t, "GET", fmt.Sprintf("/v1/object/locate?bucket=tier&key=k%03d", i), nil, &loc)
			for _, x := range loc.Extents {
				t.Logf("k%03d: egroup %x %s on %v", i, x.Egroup, x.State, x.Replicas)
			}
		}
		b, _ := json.MarshalIndent(policy, "", " ")
		t.Fatalf("nothing demoted to the remote tier; policy: %s", b)
	}
	// Promotion on access: read a remote-only object repeatedly.
	if len(remoteOnly) > 0 {
		k := remoteOnly[0]
		for j := 0; j < 3; j++ {
			local.read(t, fmt.Sprintf("k%03d", k), payload(k))
		}
		time.Sleep(6 * time.Second) // the access flush interval
		local.call(t, "POST", "/v1/curator/run?kind=partial&wait=1", nil, &rec)
		if tr := local.tiers(t, fmt.Sprintf("k%03d", k)); tr["hdd"] == 0 {
			t.Fatalf("k%03d read 3 times but not promoted: %v (job %v %v)", k, tr, rec.Done, rec.Errors)
		}
	}
	// Recall everything.
	local.call(t, "POST", "/v1/tier/recall?bucket=tier&prefix=k0", nil, &rec)
	t.Logf("recall: %v", rec.Done)
	// Losing the remote loses nothing that kept a local replica.
	remote.cmd.Process.Kill()
	remote.cmd.Wait()
	for i := 0; i < n2+n1; i++ {
		k := fmt.Sprintf("k%03d", i)
		tr := local.tiers(t, k)
		err := local.read(t, k, payload(i))
		if tr["hdd"] > 0 && err != nil {
			t.Fatalf("%s has a local replica but failed without the remote: %v", k, err)
		}
		if err != nil && !strings.Contains(err.Error(), "500") && !strings.Contains(err.Error(), "status") {
			t.Fatalf("%s: unexpected error %v", k, err)
		}
	}
}
