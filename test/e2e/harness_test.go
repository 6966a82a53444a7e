// Package e2e holds fault-path tests that run the real terrace binary on
// real files and real Pebble: crash (kill -9) under concurrent load,
// on-disk corruption, torn tails and full devices. Nothing is mocked; the
// tests talk to the server only through its admin API and CLI, and touch
// its files only the way a failing disk would.
package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// e2eRootPassword is the servers' root secret: it signs admin API calls.
const e2eRootPassword = "e2e-secret-password"

// terraceBin is the binary built once by TestMain.
var terraceBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "terrace-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	terraceBin = filepath.Join(dir, "terrace")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	cmd := exec.Command("go", "build", "-o", terraceBin, "./cmd/terrace")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building terrace:", err)
		return 1
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "e2e: built terrace in %s\n", time.Since(start).Round(time.Millisecond))
	}
	return m.Run()
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serverSpec describes a node: its data dir and device flags survive
// restarts; ports are chosen afresh at every start.
type serverSpec struct {
	dataDir string
	devices []string // tier:path:capacity[:profile]
	vector  string
	config  string // optional YAML written to dataDir/../terrace.yaml
}

// devDir returns the directory of the device with the given ID (n1/ssd0).
func (s serverSpec) devDir(t testing.TB, id string) string {
	t.Helper()
	_, name, _ := strings.Cut(id, "/")
	counts := map[string]int{}
	for _, d := range s.devices {
		parts := strings.Split(d, ":")
		tier := parts[0]
		if fmt.Sprintf("%s%d", tier, counts[tier]) == name {
			return parts[1]
		}
		counts[tier]++
	}
	t.Fatalf("no device %s in %v", id, s.devices)
	return ""
}

// server is one running `terrace server` process.
type server struct {
	t       testing.TB
	spec    serverSpec
	admin   string // http://host:port
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

var startSeq struct {
	sync.Mutex
	n int
}

// startServer launches the binary and waits for the admin API to answer.
func startServer(t testing.TB, spec serverSpec) *server {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		s, err := tryStart(t, spec)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("start terrace: %v", lastErr)
	return nil
}

func tryStart(t testing.TB, spec serverSpec) (*server, error) {
	startSeq.Lock()
	startSeq.n++
	n := startSeq.n
	startSeq.Unlock()
	adminAddr, s3Addr := freeAddr(t), freeAddr(t)
	args := []string{"server", "--data-dir", spec.dataDir, "--s3-address", s3Addr, "--admin-address", adminAddr,
		"--default-vector", spec.vector, "--log-level", "info"}
	if spec.config != "" {
		p := spec.dataDir + ".yaml"
		if err := os.WriteFile(p, []byte(spec.config), 0o644); err != nil {
			return nil, err
		}
		args = append(args, "--config", p)
	}
	for _, d := range spec.devices {
		args = append(args, "--device", d)
	}
	logPath := filepath.Join(filepath.Dir(spec.dataDir), fmt.Sprintf("server-%d.log", n))
	logF, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(terraceBin, args...)
	cmd.Stdout, cmd.Stderr = logF, logF
	cmd.Env = append(os.Environ(), "TERRACE_ROOT_PASSWORD="+e2eRootPassword)
	if err := cmd.Start(); err != nil {
		logF.Close()
		return nil, err
	}
	s := &server{t: t, spec: spec, admin: "http://" + adminAddr, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		logF.Close()
		close(s.exited)
	}()
	t.Cleanup(func() { s.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-s.exited:
			return nil, fmt.Errorf("server exited during start-up (%v); log:\n%s", s.waitErr, s.log())
		default:
		}
		resp, err := s.client().hc.Get(s.admin + "/v1/status")
		if err == nil {
			resp.Body.Close()
			// The S3 gateway starts after the admin API; a node whose S3
			// port is taken exits, so wait for it too.
			if resp.StatusCode == 200 && dialable(s3Addr) {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("server did not answer within 30s; log:\n%s", s.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// log returns the server's output so far.
func (s *server) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *server) kill() {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// stop asks the server to shut down cleanly (SIGTERM) and waits.
func (s *server) stop() {
	s.t.Helper()
	select {
	case <-s.exited:
		s.t.Fatalf("server already exited (%v); log:\n%s", s.waitErr, s.log())
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		s.kill()
		s.t.Fatalf("server ignored SIGTERM for 20s; log:\n%s", s.log())
	}
}

// alive reports whether the process is still running.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

var recoveryRE = regexp.MustCompile(`msg="recovery done".*report="([^"]*)"`)

// recoveryReport returns the key=value counts of the server's start-up
// recovery log line.
func (s *server) recoveryReport() map[string]int {
	s.t.Helper()
	m := recoveryRE.FindStringSubmatch(s.log())
	if m == nil {
		s.t.Fatalf("no recovery log line; log:\n%s", s.log())
	}
	out := map[string]int{}
	for _, kv := range strings.Fields(m[1]) {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if err != nil {
			s.t.Fatalf("recovery line %q: %v", m[0], err)
		}
		out[k] = n
	}
	return out
}

// client is a small admin API client.
type client struct {
	base string
	hc   *http.Client
}

func (s *server) client() *client {
	return &client{base: s.admin, hc: &http.Client{Timeout: 60 * time.Second, Transport: &adminauth.Transport{
		AccessKey: "terrace", SecretKey: e2eRootPassword, Base: &http.Transport{MaxIdleConnsPerHost: 32}}}}
}

type apiErr struct {
	Status int
	Code   string `json:"code"`
	Msg    string `json:"error"`
}

func (e *apiErr) Error() string { return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg) }

func (c *client) do(method, path string, q url.Values, body []byte) (*http.Response, error) {
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		return nil, err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		e := &apiErr{Status: resp.StatusCode}
		if json.Unmarshal(b, e) != nil || e.Msg == "" {
			e.Msg = string(b)
		}
		return nil, e
	}
	return resp, nil
}

func (c *client) json(method, path string, q url.Values, body []byte, out any) error {
	resp, err := c.do(method, path, q, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

func (c *client) createBucket(bucket, vector string) error {
	q := url.Values{}
	if vector != "" {
		q.Set("vector", vector)
	}
	return c.json("PUT", "/v1/buckets/"+bucket, q, nil, nil)
}

// put stores an object and returns nil only on a complete 200 answer.
func (c *client) put(bucket, key string, data []byte) error {
	var out struct {
		Size int64  `json:"size"`
		ETag string `json:"etag"`
	}
	if err := c.json("PUT", "/v1/data/"+bucket+"/"+key, nil, data, &out); err != nil {
		return err
	}
	if out.Size != int64(len(data)) {
		return fmt.Errorf("put %s/%s: acknowledged size %d, sent %d", bucket, key, out.Size, len(data))
	}
	return nil
}

// get returns an object's bytes. A body that ends early is an error.
func (c *client) get(bucket, key string) ([]byte, error) {
	resp, err := c.do("GET", "/v1/data/"+bucket+"/"+key, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return b, fmt.Errorf("get %s/%s: body after %d bytes: %w", bucket, key, len(b), err)
	}
	return b, nil
}

func (c *client) del(bucket, key string) error {
	return c.json("DELETE", "/v1/data/"+bucket+"/"+key, nil, nil, nil)
}

type replica struct {
	Device string `json:"d"`
	Tier   string `json:"t"`
	Bad    bool   `json:"b"`
}

type extentLoc struct {
	Extent    uint64    `json:"extent"`
	Offset    int64     `json:"offset"`
	Length    int64     `json:"length"`
	Egroup    uint64    `json:"egroup"`
	EgroupOff int64     `json:"egroup_offset"`
	State     string    `json:"state"`
	Replicas  []replica `json:"replicas"`
	Error     string    `json:"error"`
}

type location struct {
	Size    int64          `json:"size"`
	Vector  string         `json:"vector"`
	Extents []extentLoc    `json:"extents"`
	Tiers   map[string]int `json:"tiers"`
}

func (c *client) locate(bucket, key string) (location, error) {
	var loc location
	err := c.json("GET", "/v1/object/locate", url.Values{"bucket": {bucket}, "key": {key}}, nil, &loc)
	return loc, err
}

type tierReport struct {
	Tiers []struct {
		Tier          string `json:"tier"`
		CapacityBytes int64  `json:"capacity_bytes"`
		UsedBytes     int64  `json:"used_bytes"`
		Egroups       int    `json:"egroups"`
		EgroupBytes   int64  `json:"egroup_bytes"`
	} `json:"tiers"`
	Devices []struct {
		ID          string `json:"ID"`
		Tier        string `json:"Tier"`
		UsedBytes   int64  `json:"UsedBytes"`
		Egroups     int    `json:"egroups"`
		EgroupBytes int64  `json:"egroup_bytes"`
		BadReplicas int    `json:"bad_replicas"`
	} `json:"devices"`
}

func (c *client) report() (tierReport, error) {
	var r tierReport
	err := c.json("GET", "/v1/tier/report", nil, nil, &r)
	return r, err
}

// metric returns the value of an unlabelled Prometheus counter or gauge.
func (c *client) metric(name string) (float64, error) {
	resp, err := c.do("GET", "/metrics", nil, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("metric %s not exported", name)
}

// cli runs a client subcommand of the binary against the server.
func (s *server) cli(args ...string) (string, error) {
	cmd := exec.Command(terraceBin, append(args, "--endpoint", s.admin, "--access-key", "terrace", "--secret-key", e2eRootPassword)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// content returns the deterministic bytes of generation gen of key: the
// size (within [minSize, maxSize]) and every byte derive from seed, key and
// gen, so a reader can verify an object knowing only its name.
func content(seed uint64, key string, gen, minSize, maxSize int) []byte {
	h := sha256.Sum256([]byte(fmt.Sprintf("%d/%s/%d", seed, key, gen)))
	rng := rand.New(rand.NewChaCha8(h))
	size := minSize + rng.IntN(maxSize-minSize+1)
	b := make([]byte, size)
	for i := 0; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], rng.Uint64())
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// egroupFile is the path of an egroup replica file under a device dir.
func egroupFile(devDir string, id uint64) string {
	return filepath.Join(devDir, "eg", fmt.Sprintf("%02x", id&0xff), fmt.Sprintf("%016x.eg", id))
}

// flipByte XORs one byte of a file in place.
func flipByte(t testing.TB, path string, off int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatalf("flip %s at %d: %v", path, off, err)
	}
	b[0] ^= 0x5a
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
