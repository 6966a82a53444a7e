// Package devcluster runs a local multi-node Terrace on loopback: N
// `terrace server` processes with embedded etcd members, emulated tiers and
// a shared cluster secret. It backs `terrace dev cluster`, the cluster
// end-to-end tests and the benchmarks. It only starts, stops, kills and
// restarts processes, and starts held-back ones later (Options.Launch,
// Cluster.Join: a node joining a live cluster); it never reaches into a
// node's state.
package devcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/tlsconf"
)

// The nodes run with the server's default root account; these keys sign
// admin API requests to them (AdminClient).
const (
	AccessKey = "terrace"
	SecretKey = "terrace-secret"
)

// AdminClient returns an HTTP client that signs admin API requests with
// the cluster's root keys.
func AdminClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &adminauth.Transport{
		Base: &http.Transport{MaxIdleConnsPerHost: 64}, AccessKey: AccessKey, SecretKey: SecretKey}}
}

// Options configure a dev cluster.
type Options struct {
	Binary   string // terrace binary
	Dir      string
	Nodes    int
	Racks    int
	BasePort int
	// Emulate throttles devices like real media (demo); off for tests.
	Emulate       bool
	DefaultVector string
	// Devices per node, as tier:NAME:capacity (NAME becomes a directory).
	Devices []string
	Secret  string
	// ExtraArgs are appended to every server command line.
	ExtraArgs []string
	// TLS generates a throw-away cluster CA and node certificates under
	// Dir/tls and makes every listener speak TLS (node-to-node and etcd
	// traffic mutual TLS).
	TLS bool
	// Members is the number of embedded etcd members, the first nodes
	// (0: 3, or 5 from 5 nodes on; 1 for 2 nodes).
	Members int

	// Hooks for the chaos suite (internal/chaos), which puts its
	// fault-injecting proxies between the nodes. Nil: direct connections.

	// AdvertisePeerURL gives member i the etcd peer URL it announces and
	// --initial-cluster lists (a proxy in front of its real peer listener,
	// Port(i, PortEtcdPeer)).
	AdvertisePeerURL func(i int) string
	// MetaEndpoints gives node i its etcd client endpoints; every node
	// then runs with --meta-endpoints and --static-meta-endpoints.
	MetaEndpoints func(i int) []string
	// NodeArgs appends node i's own arguments (after ExtraArgs).
	NodeArgs func(i int) []string

	// Launch is how many of the nodes Start launches, the first ones (0:
	// all). The others are configured but held back: Join starts one later
	// and waits until the running cluster sees it, as an operator adds a
	// server to a live cluster. Held-back nodes cannot be etcd members
	// (the founding members start together), so Launch must be at least
	// Members.
	Launch int
}

// Port offsets: node i listens on Port(i, offset).
const (
	PortS3 = iota
	PortAdmin
	PortRPC
	PortEtcdClient
	PortEtcdPeer
)

// Port is node i's port for an offset (PortS3 ... PortEtcdPeer).
func (o *Options) Port(i, offset int) int { return o.BasePort + i*10 + offset }

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Racks == 0 {
		o.Racks = 1
	}
	if o.BasePort == 0 {
		o.BasePort = 9100
	}
	if o.DefaultVector == "" {
		o.DefaultVector = "any=2"
	}
	if len(o.Devices) == 0 {
		o.Devices = []string{"ssd:ssd0:2GiB", "hdd:hdd0:8GiB", "hdd:hdd1:8GiB"}
	}
}

// Node is one server process.
type Node struct {
	ID      string   `json:"id"`
	Rack    string   `json:"rack"`
	S3      string   `json:"s3"`
	Admin   string   `json:"admin"`
	RPC     string   `json:"rpc"`
	Member  bool     `json:"etcd_member"`
	Dir     string   `json:"dir"`
	Args    []string `json:"args"`
	LogPath string   `json:"log"`
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process has exited
	// held marks a node Start configured but did not launch
	// (Options.Launch); atomic, so Running may be read while Join runs.
	held atomic.Bool
}

// Held reports whether the node is held back for Join and not yet started.
func (n *Node) Held() bool { return n.held.Load() }

func (n *Node) exited() bool {
	if n.done == nil {
		return true
	}
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Cluster is a running dev cluster.
type Cluster struct {
	Opts   Options `json:"-"`
	Secret string  `json:"secret"`
	Nodes  []*Node `json:"nodes"`
	// CAFile is the cluster CA of a TLS cluster: clients trust it.
	CAFile string `json:"ca_file,omitempty"`
}

// Scheme is "https" for a TLS cluster, else "http".
func (c *Cluster) Scheme() string {
	if c.CAFile != "" {
		return "https"
	}
	return "http"
}

// AdminClient returns an HTTP client that signs admin API requests with
// the root keys and, in a TLS cluster, trusts the cluster CA.
func (c *Cluster) AdminClient(timeout time.Duration) (*http.Client, error) {
	base := &http.Transport{MaxIdleConnsPerHost: 64}
	if c.CAFile != "" {
		tc, err := tlsconf.ClientTrusting(c.CAFile)
		if err != nil {
			return nil, err
		}
		base.TLSClientConfig = tc
	}
	return &http.Client{Timeout: timeout, Transport: &adminauth.Transport{Base: base, AccessKey: AccessKey, SecretKey: SecretKey}}, nil
}

// Start launches every node and waits until all admin APIs answer.
func Start(ctx context.Context, o Options) (*Cluster, error) {
	o.EnsureDefaults()
	if o.Nodes < 1 || o.Nodes > 64 {
		return nil, fmt.Errorf("devcluster: %d nodes: want 1..64", o.Nodes)
	}
	if o.Racks < 1 || o.Racks > o.Nodes {
		return nil, fmt.Errorf("devcluster: %d racks for %d nodes", o.Racks, o.Nodes)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	c := &Cluster{Opts: o, Secret: o.Secret}
	// Reuse the secret of an existing dev cluster directory so a restart
	// keeps authenticating against data written before.
	if b, err := os.ReadFile(filepath.Join(o.Dir, "cluster.json")); err == nil && c.Secret == "" {
		var old Cluster
		if json.Unmarshal(b, &old) == nil {
			c.Secret = old.Secret
		}
	}
	if c.Secret == "" {
		var raw [16]byte
		rand.Read(raw[:])
		c.Secret = hex.EncodeToString(raw[:])
	}
	members := 3
	if o.Nodes >= 5 {
		members = 5
	}
	members = min(members, o.Nodes)
	if o.Nodes == 2 {
		members = 1 // two etcd members tolerate no failure; one is simpler
	}
	if o.Members != 0 {
		if o.Members < 1 || o.Members > o.Nodes {
			return nil, fmt.Errorf("devcluster: %d etcd members for %d nodes", o.Members, o.Nodes)
		}
		members = o.Members
	}
	launch := o.Nodes
	if o.Launch != 0 {
		if o.Launch < members || o.Launch > o.Nodes {
			return nil, fmt.Errorf("devcluster: launch %d of %d nodes: want %d..%d (every etcd member starts at once)", o.Launch, o.Nodes, members, o.Nodes)
		}
		launch = o.Launch
	}
	port := func(i, k int) int { return o.BasePort + i*10 + k }
	var tlsArgs func(id string) []string
	if o.TLS {
		dir := filepath.Join(o.Dir, "tls")
		var names []string
		for i := 0; i < o.Nodes; i++ {
			names = append(names, fmt.Sprintf("n%d", i+1))
		}
		if err := tlsconf.DevCA(dir, names...); err != nil {
			return nil, fmt.Errorf("devcluster: generate TLS certificates: %w", err)
		}
		c.CAFile = filepath.Join(dir, "ca.pem")
		tlsArgs = func(id string) []string {
			return []string{"--tls-cert", filepath.Join(dir, id+".pem"), "--tls-key", filepath.Join(dir, id+"-key.pem"), "--tls-ca", c.CAFile}
		}
	}
	scheme := c.Scheme()
	var initial, endpoints []string
	for i := 0; i < members; i++ {
		peer := fmt.Sprintf("%s://127.0.0.1:%d", scheme, port(i, 4))
		if o.AdvertisePeerURL != nil {
			peer = o.AdvertisePeerURL(i)
		}
		initial = append(initial, fmt.Sprintf("n%d=%s", i+1, peer))
		endpoints = append(endpoints, fmt.Sprintf("%s://127.0.0.1:%d", scheme, port(i, 3)))
	}
	for i := 0; i < o.Nodes; i++ {
		n := &Node{
			ID: fmt.Sprintf("n%d", i+1), Rack: fmt.Sprintf("r%d", i%o.Racks+1),
			S3: fmt.Sprintf("127.0.0.1:%d", port(i, 0)), Admin: fmt.Sprintf("127.0.0.1:%d", port(i, 1)),
			RPC: fmt.Sprintf("127.0.0.1:%d", port(i, 2)), Member: i < members,
			Dir: filepath.Join(o.Dir, fmt.Sprintf("n%d", i+1)),
		}
		n.held.Store(i >= launch)
		n.LogPath = filepath.Join(n.Dir, "server.log")
		n.Args = []string{"server", "--node-id", n.ID, "--rack", n.Rack, "--data-dir", n.Dir,
			"--s3-address", n.S3, "--admin-address", n.Admin, "--rpc-address", n.RPC,
			"--initial-cluster", strings.Join(initial, ","), "--default-vector", o.DefaultVector}
		if n.Member {
			n.Args = append(n.Args, "--etcd-peer-url", fmt.Sprintf("%s://127.0.0.1:%d", scheme, port(i, 4)),
				"--etcd-client-url", fmt.Sprintf("%s://127.0.0.1:%d", scheme, port(i, 3)))
			if o.AdvertisePeerURL != nil {
				n.Args = append(n.Args, "--etcd-advertise-peer-url", o.AdvertisePeerURL(i))
			}
		}
		switch {
		case o.MetaEndpoints != nil:
			n.Args = append(n.Args, "--meta-endpoints", strings.Join(o.MetaEndpoints(i), ","), "--static-meta-endpoints")
		case !n.Member:
			n.Args = append(n.Args, "--meta-endpoints", strings.Join(endpoints, ","))
		}
		for _, d := range o.Devices {
			parts := strings.SplitN(d, ":", 3)
			if len(parts) != 3 {
				return nil, fmt.Errorf("devcluster: device %q: want tier:name:capacity", d)
			}
			n.Args = append(n.Args, "--device", parts[0]+":"+filepath.Join(n.Dir, parts[1])+":"+parts[2])
		}
		if o.Emulate {
			n.Args = append(n.Args, "--emulate")
		}
		if tlsArgs != nil {
			n.Args = append(n.Args, tlsArgs(n.ID)...)
		}
		n.Args = append(n.Args, o.ExtraArgs...)
		if o.NodeArgs != nil {
			n.Args = append(n.Args, o.NodeArgs(i)...)
		}
		c.Nodes = append(c.Nodes, n)
	}
	// Founding members must start together: each waits for a quorum.
	var started []*Node
	for _, n := range c.Nodes {
		if n.held.Load() {
			continue
		}
		if err := c.launch(n); err != nil {
			c.Stop()
			return nil, err
		}
		started = append(started, n)
	}
	if err := c.WaitReady(ctx, started...); err != nil {
		c.Stop()
		return nil, err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := os.WriteFile(filepath.Join(o.Dir, "cluster.json"), b, 0o600); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) launch(n *Node) error {
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Opts.Binary, n.Args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), "TERRACE_CLUSTER_SECRET="+c.Secret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("devcluster: start %s: %w", n.ID, err)
	}
	n.cmd = cmd
	n.done = make(chan struct{})
	done := n.done
	go func() { cmd.Wait(); logf.Close(); close(done) }()
	return nil
}

// Running returns the nodes launched so far (not held back), in order.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if !n.held.Load() {
			out = append(out, n)
		}
	}
	return out
}

// Join starts a node held back by Options.Launch and waits until its
// admin API answers and the node it asks (the first running one) lists
// it up, with its devices, in the cluster view: from then on placement
// and the Curator see it. The node registers itself through the
// metadata store like any non-member node; Join only starts the process.
func (c *Cluster) Join(ctx context.Context, n *Node) error {
	if !n.held.Load() {
		return fmt.Errorf("devcluster: %s is not held back (already launched)", n.ID)
	}
	if n.Member {
		return fmt.Errorf("devcluster: %s is an etcd member; members cannot join later", n.ID)
	}
	var seed *Node
	for _, m := range c.Nodes {
		if !m.held.Load() && !m.exited() {
			seed = m
			break
		}
	}
	if seed == nil {
		return fmt.Errorf("devcluster: no running node to join")
	}
	if err := c.launch(n); err != nil {
		return err
	}
	n.held.Store(false)
	if err := c.WaitReady(ctx, n); err != nil {
		return err
	}
	return c.waitListed(ctx, seed, n)
}

// WaitViews waits until every running node's cluster view lists every
// running node up with its devices: before that, a write entering at a
// node that has not yet heard of its peers cannot place a vector that
// needs several nodes (InsufficientStorage).
func (c *Cluster) WaitViews(ctx context.Context) error {
	running := c.Running()
	for _, seed := range running {
		for _, n := range running {
			if err := c.waitListed(ctx, seed, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitListed polls seed's cluster view until n is up with devices.
func (c *Cluster) waitListed(ctx context.Context, seed, n *Node) error {
	hc, err := c.AdminClient(5 * time.Second)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if c.listed(ctx, hc, seed, n.ID) {
			return nil
		}
		if n.exited() {
			return fmt.Errorf("devcluster: %s exited while joining; see %s", n.ID, n.LogPath)
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("devcluster: %s not in %s's cluster view within 60s; see %s", n.ID, seed.ID, n.LogPath)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// listed reports whether seed's /v1/status lists node id up with at
// least one device. Only the fields it needs are decoded: the package
// talks to nodes over their API and shares no types with the server.
func (c *Cluster) listed(ctx context.Context, hc *http.Client, seed *Node, id string) bool {
	req, err := http.NewRequestWithContext(ctx, "GET", c.Scheme()+"://"+seed.Admin+"/v1/status", nil)
	if err != nil {
		return false
	}
	resp, err := hc.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		Cluster *struct {
			Nodes []struct {
				ID      string            `json:"id"`
				Up      bool              `json:"up"`
				Devices []json.RawMessage `json:"devices"`
			} `json:"nodes"`
		} `json:"cluster"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&st) != nil || st.Cluster == nil {
		return false
	}
	for _, v := range st.Cluster.Nodes {
		if v.ID == id {
			return v.Up && len(v.Devices) > 0
		}
	}
	return false
}

// WaitReady waits until the nodes' admin APIs answer.
func (c *Cluster) WaitReady(ctx context.Context, nodes ...*Node) error {
	deadline := time.Now().Add(90 * time.Second)
	hc, err := c.AdminClient(5 * time.Second)
	if err != nil {
		return err
	}
	for _, n := range nodes {
		for {
			resp, err := hc.Get(c.Scheme() + "://" + n.Admin + "/v1/status")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if n.exited() {
				return fmt.Errorf("devcluster: %s exited; see %s", n.ID, n.LogPath)
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("devcluster: %s not ready; see %s", n.ID, n.LogPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

// Kill sends SIGKILL to a node (no clean shutdown: a crash).
func (c *Cluster) Kill(n *Node) {
	if n.cmd != nil && n.cmd.Process != nil {
		n.cmd.Process.Kill()
		select {
		case <-n.done:
		case <-time.After(5 * time.Second):
		}
	}
}

// Restart starts a killed or stopped node again with the same arguments.
func (c *Cluster) Restart(ctx context.Context, n *Node) error {
	if n.held.Load() {
		return fmt.Errorf("devcluster: %s is held back; Join starts it", n.ID)
	}
	if err := c.launch(n); err != nil {
		return err
	}
	return c.WaitReady(ctx, n)
}

// PID returns a node's process ID (0 if not running).
func (n *Node) PID() int {
	if n.exited() {
		return 0
	}
	return n.cmd.Process.Pid
}

// Stop terminates every node (SIGTERM, then SIGKILL after 10 s).
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		if !n.exited() {
			n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range c.Nodes {
		for !n.exited() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if !n.exited() {
			n.cmd.Process.Kill()
		}
	}
}
