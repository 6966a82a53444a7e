package server

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/tlsconf"
)

// Config is a node's configuration. Zero values mean defaults.
type Config struct {
	// NodeID names the node; default "n1".
	NodeID string `yaml:"node_id"`
	Rack   string `yaml:"rack"`
	// DataDir holds metadata and, by default, device directories.
	DataDir      string `yaml:"data_dir"`
	S3Address    string `yaml:"s3_address"`
	AdminAddress string `yaml:"admin_address"`
	RootUser     string `yaml:"root_user"`
	RootPassword string `yaml:"root_password"`
	// InsecureDefaultCredentials lets the node serve the published demo
	// root password (DefaultRootPassword) on an S3 or admin listener that
	// is not on loopback. Without it such a node refuses to start: anyone
	// who can reach it would be root. For throw-away demos only.
	InsecureDefaultCredentials bool `yaml:"insecure_default_credentials"`
	// TLSCert and TLSKey (PEM) make every listener speak TLS: S3, the
	// admin API and, in a cluster, the replica RPC and etcd. TLSCA is the
	// cluster CA: in cluster mode node-to-node traffic (replica RPC, etcd
	// peer and client) is mutual TLS with certificates from it.
	TLSCert string `yaml:"tls_cert"`
	TLSKey  string `yaml:"tls_key"`
	TLSCA   string `yaml:"tls_ca"`
	// AdminPublic lists admin API endpoints served without a signature:
	// "metrics" (/metrics, for a Prometheus that cannot sign) and
	// "health" (/v1/health, for load balancers). Everything else on the
	// admin API always needs an admin's SigV4 signature.
	AdminPublic []string `yaml:"admin_public"`
	Region      string   `yaml:"region"`
	// Devices are "tier:path:capacity[:profile]" specs. Empty means the
	// demo layout: mem, ssd and hdd emulated under DataDir.
	Devices []string `yaml:"devices"`
	// Emulate applies the tier's emulation profile to devices that do not
	// name one (on for the demo, off for real devices).
	Emulate bool `yaml:"emulate"`
	// DefaultVector applies to buckets without one.
	DefaultVector string `yaml:"default_vector"`
	// StorageClasses maps extra S3 storage classes to vectors.
	StorageClasses map[string]string `yaml:"storage_classes"`
	// Placement selects the write-placement policy.
	Placement string `yaml:"placement"`
	// ReadOrder selects the read ordering: "octopus" (tier-, load- and
	// network-aware; default) or "locality" (local replicas first).
	ReadOrder string `yaml:"read_order"`
	// NetMBps is this node's network throughput in MB/s, the NetThru term
	// of read ordering (default 1250: 10 GbE).
	NetMBps float64 `yaml:"net_mbps"`
	// EgroupMaxBytes is the size at which an extent group is sealed (0:
	// 16 MiB). It is the unit the Curator moves; keep it a small fraction
	// of the smallest device (a scaled-down test tier wants a smaller one).
	EgroupMaxBytes int64 `yaml:"egroup_max_bytes"`
	// BatchMaxBytes is the largest object whose PUT shares one fsynced
	// egroup append (and one replica call) with the concurrent small PUTs
	// of the same vector (0: 64 KiB; -1: never share; at most 128 KiB).
	// Acknowledgement still waits for the object's own bytes on every
	// replica and its own metadata commit (docs/design/0012).
	BatchMaxBytes int64 `yaml:"batch_max_bytes"`
	// MetaBlockCacheBytes sizes the block cache of a single node's
	// embedded metadata store (Pebble; 0: 64 MiB). Raise it when the
	// metadata of a node's hot objects outgrows it (terrace_meta_reads_total
	// climbing with the disk's read rate); a cluster's etcd members keep
	// their records in memory and ignore it.
	MetaBlockCacheBytes int64 `yaml:"meta_block_cache_bytes"`
	// MetaWritePath is how a node that runs an embedded etcd member sends
	// its metadata transactions: "local" (default) through its own member
	// in-process, which forwards the proposal to the raft leader; or
	// "network" through the etcd client to any member (one gRPC call to
	// another process for most transactions). Nodes without a member
	// always use the network.
	MetaWritePath string `yaml:"meta_write_path"`
	// MetaRecordFormat is the form egroup, access, extent, object and
	// version records are written in: binary (the default; under half the
	// bytes of JSON and several times faster to decode) or json, for a
	// cluster some of whose nodes still run a version that reads only
	// JSON records (a rolling upgrade: set json, upgrade every node, then
	// drop the setting). Records of either form are read either way.
	// json also makes every write rewrite its egroup's record, as older
	// versions expect of an open egroup (object.Options.EgroupRecordLag).
	MetaRecordFormat string `yaml:"meta_record_format"`
	// GCPercent is the Go garbage collector's target (GOGC; 0: 200, see
	// DefaultGCPercent); the GOGC environment variable wins.
	GCPercent int `yaml:"gc_percent"`
	// MemoryLimitBytes is the process's soft memory limit (GOMEMLIMIT; 0:
	// none): past it the collector runs harder instead of growing the
	// heap. The GOMEMLIMIT environment variable wins.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// DeviceCheckEvery is the period of each device's health check (a
	// 4 KiB write, sync and read through the data path, device.Check):
	// a disk that died under cold data is marked failed within this
	// period instead of at the next I/O that happens to touch it, so the
	// Curator's failure-driven re-protection starts. Default 10s;
	// negative disables.
	DeviceCheckEvery time.Duration `yaml:"device_check_every"`
	// OrphanSweepEvery is the period of the orphan sweep: each node
	// removes the replica files on its devices that no egroup record
	// lists there and that have not been modified for 10 minutes (left by
	// a crash in the middle of a move, a removal or a write), instead of
	// leaving them until its next restart. Default 1h; negative disables.
	OrphanSweepEvery time.Duration `yaml:"orphan_sweep_every"`
	// S3SpoolMaxBytes bounds the bytes of chunked S3 uploads (no
	// Content-Length) spooled to the data directory at once on this node:
	// over it uploads get 503 SlowDown. 0: the default (5 GiB, one
	// largest single PUT); negative: such uploads are refused (411).
	S3SpoolMaxBytes int64 `yaml:"s3_spool_max_bytes"`
	// DeviceSync is how writes to directory devices become durable:
	// "file" (fsync each file), "fs" (group commit: concurrent syncs on one
	// device share one syncfs(2); for devices that are filesystems of their
	// own, Linux ≥ 5.8) or "auto" (the default: fs for a device directory
	// that is a mount point, file otherwise). docs/storage.md.
	DeviceSync string `yaml:"device_sync"`
	// ProbeBytes is the size of the start-up throughput probe per device.
	ProbeBytes    int64         `yaml:"probe_bytes"`
	StatsInterval time.Duration `yaml:"stats_interval"`
	LogLevel      string        `yaml:"log_level"`
	// ConsoleSampleEvery and ConsoleSamples size the web console's metric
	// history ring (default every 5s, 720 samples: an hour).
	ConsoleSampleEvery time.Duration `yaml:"console_sample_every"`
	ConsoleSamples     int           `yaml:"console_samples"`

	// Curator schedules and thresholds (zero: the paper's defaults).
	Curator CuratorConfig `yaml:"curator"`
	// Planner holds the planner's rules (terrace plan), one rule per
	// entry, e.g. "load_balanced spread=0.2"; empty: the defaults
	// (docs/planner.md).
	Planner struct {
		Rules []string `yaml:"rules"`
		// LiveRules are the rules every Curator scan plans with after its
		// own decisions (disk balancing and failure-domain spread; empty:
		// disk_balanced with the curator's balance_mean and
		// balance_spread, failure_domain_spread level=node and
		// device_has_space max_fill=0.95; ["off"]: no live planning).
		LiveRules []string `yaml:"live_rules"`
	} `yaml:"planner"`
	// Lifecycle tunes the S3 lifecycle runner (lifecycle.go).
	Lifecycle LifecycleConfig `yaml:"lifecycle"`

	// Cluster mode (any of these set). InitialCluster lists the founding
	// embedded etcd members as "name=peerURL,..."; a node whose NodeID is
	// in it runs a member. MetaEndpoints uses an external etcd instead.
	InitialCluster string   `yaml:"initial_cluster"`
	EtcdPeerURL    string   `yaml:"etcd_peer_url"`
	EtcdClientURL  string   `yaml:"etcd_client_url"`
	MetaEndpoints  []string `yaml:"meta_endpoints"`
	RPCAddress     string   `yaml:"rpc_address"`
	// ClusterSecret authenticates node-to-node RPCs (HMAC); required in
	// cluster mode.
	ClusterSecret string `yaml:"cluster_secret"`
	// MasterKeyFile is the master keyring sealing SSE-S3 data keys and
	// user secrets (see openKeys); default: derived from the cluster
	// secret in a cluster, <data_dir>/master.key on a single node.
	MasterKeyFile string `yaml:"master_key_file"`

	// EtcdAdvertisePeerURL is the peer URL this node's etcd member
	// advertises (and --initial-cluster lists) when peers reach it through
	// something in between — a proxy, NAT, or the chaos suite's
	// fault-injecting proxies. Empty: EtcdPeerURL.
	EtcdAdvertisePeerURL string `yaml:"etcd_advertise_peer_url"`
	// StaticMetaEndpoints keeps the etcd client on MetaEndpoints instead of
	// replacing them with the client URLs the members advertise (endpoints
	// behind a proxy or load balancer).
	StaticMetaEndpoints bool `yaml:"static_meta_endpoints"`

	// Test hooks (internal/chaos). Never set them in production.

	// PeerRPCOverride maps a node ID to the address this node dials for
	// that node's replica RPC instead of the one it registered (the chaos
	// suite's per-link proxies).
	PeerRPCOverride map[string]string `yaml:"peer_rpc_override"`
	// FaultInjection enables POST /v1/debug/fault, which injects device
	// faults (EIO, ENOSPC, latency).
	FaultInjection bool `yaml:"fault_injection"`
}

// foundingMember reports whether this node is named in InitialCluster (an
// etcd member): a whole "ID=" entry, so node n1 is not taken for n11.
func (c *Config) foundingMember() bool {
	return strings.Contains(","+c.InitialCluster, ","+c.NodeID+"=")
}

// Clustered reports whether the node runs as part of a multi-node cluster.
func (c *Config) Clustered() bool { return c.InitialCluster != "" || len(c.MetaEndpoints) > 0 }

// Defaults.
const (
	DefaultS3Address    = "127.0.0.1:9000"
	DefaultAdminAddress = "127.0.0.1:9001"
	DefaultRootUser     = "terrace"
	DefaultRootPassword = "terrace-secret"
)

// LoadFile reads a YAML config file.
func LoadFile(path string) (Config, error) {
	var c Config
	b, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("server: read config: %w", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return c, fmt.Errorf("server: parse config %s: %w", path, err)
	}
	return c, nil
}

// ApplyEnv overrides fields from TERRACE_* environment variables.
func (c *Config) ApplyEnv(getenv func(string) string) {
	set := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	set(&c.NodeID, "TERRACE_NODE_ID")
	set(&c.DataDir, "TERRACE_DATA_DIR")
	set(&c.S3Address, "TERRACE_S3_ADDRESS")
	set(&c.AdminAddress, "TERRACE_ADMIN_ADDRESS")
	set(&c.RootUser, "TERRACE_ROOT_USER")
	set(&c.RootPassword, "TERRACE_ROOT_PASSWORD")
	if v, err := strconv.ParseBool(getenv("TERRACE_INSECURE_DEFAULT_CREDENTIALS")); err == nil && v {
		c.InsecureDefaultCredentials = true
	}
	set(&c.DefaultVector, "TERRACE_DEFAULT_VECTOR")
	set(&c.Placement, "TERRACE_PLACEMENT")
	set(&c.ReadOrder, "TERRACE_READ_ORDER")
	set(&c.MetaWritePath, "TERRACE_META_WRITE_PATH")
	set(&c.MetaRecordFormat, "TERRACE_META_RECORD_FORMAT")
	set(&c.ClusterSecret, "TERRACE_CLUSTER_SECRET")
	set(&c.TLSCert, "TERRACE_TLS_CERT")
	set(&c.TLSKey, "TERRACE_TLS_KEY")
	set(&c.TLSCA, "TERRACE_TLS_CA")
	if v := getenv("TERRACE_ADMIN_PUBLIC"); v != "" {
		c.AdminPublic = strings.Split(v, ",")
	}
	set(&c.InitialCluster, "TERRACE_INITIAL_CLUSTER")
	set(&c.RPCAddress, "TERRACE_RPC_ADDRESS")
	set(&c.MasterKeyFile, "TERRACE_MASTER_KEY_FILE")
	if v := getenv("TERRACE_META_ENDPOINTS"); v != "" {
		c.MetaEndpoints = strings.Split(v, ",")
	}
	if v := getenv("TERRACE_DEVICES"); v != "" {
		c.Devices = strings.Split(v, ",")
	}
}

// EnsureDefaults fills zero fields.
func (c *Config) EnsureDefaults() {
	if c.NodeID == "" {
		c.NodeID = "n1"
	}
	if c.Rack == "" {
		c.Rack = "r1"
	}
	if c.DataDir == "" {
		c.DataDir = "terrace-data"
	}
	if c.S3Address == "" {
		c.S3Address = DefaultS3Address
	}
	if c.AdminAddress == "" {
		c.AdminAddress = DefaultAdminAddress
	}
	if c.RootUser == "" {
		c.RootUser = DefaultRootUser
	}
	if c.RootPassword == "" {
		c.RootPassword = DefaultRootPassword
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if len(c.Devices) == 0 {
		c.Devices = DemoDevices(c.DataDir)
		c.Emulate = true
	}
	if c.DefaultVector == "" {
		c.DefaultVector = "any=2"
	}
	if c.Placement == "" {
		c.Placement = DefaultPlacement
	}
	if c.MetaWritePath == "" {
		c.MetaWritePath = "local"
	}
	if c.ReadOrder == "" {
		c.ReadOrder = "octopus"
	}
	if c.NetMBps == 0 {
		c.NetMBps = 1250
	}
	if c.ProbeBytes == 0 {
		c.ProbeBytes = 4 << 20
	}
	if c.DeviceCheckEvery == 0 {
		c.DeviceCheckEvery = 10 * time.Second
	}
	if c.OrphanSweepEvery == 0 {
		c.OrphanSweepEvery = time.Hour
	}
	if c.StatsInterval == 0 {
		c.StatsInterval = time.Second
	}
	if c.LogLevel == "" {
		c.LogLevel = "info"
	}
}

// etcdURLsHTTPS checks that a TLS node names every etcd URL with https://:
// its own peer and client URLs, the founding members' peer URLs and the
// metadata endpoints it dials. An http:// one would carry metadata (and
// every record's secrets) in plain text, or fail against TLS members.
func (c *Config) etcdURLsHTTPS() error {
	check := func(flag, u string) error {
		if u = strings.TrimSpace(u); u != "" && !strings.HasPrefix(u, "https://") {
			return fmt.Errorf("server: with TLS, --%s must be https:// (got %s)", flag, u)
		}
		return nil
	}
	for _, f := range []struct{ flag, u string }{{"etcd-peer-url", c.EtcdPeerURL}, {"etcd-client-url", c.EtcdClientURL},
		{"etcd-advertise-peer-url", c.EtcdAdvertisePeerURL}} {
		if err := check(f.flag, f.u); err != nil {
			return err
		}
	}
	for _, m := range strings.Split(c.InitialCluster, ",") {
		if m = strings.TrimSpace(m); m == "" {
			continue
		}
		name, u, ok := strings.Cut(m, "=")
		if !ok {
			return fmt.Errorf("server: --initial-cluster member %q: want name=peerURL", m)
		}
		if err := check("initial-cluster", u); err != nil {
			return fmt.Errorf("%w (member %s)", err, name)
		}
	}
	for _, u := range c.MetaEndpoints {
		if err := check("meta-endpoints", u); err != nil {
			return err
		}
	}
	return nil
}

// warnInsecure logs, at start-up, what the configuration leaves open: the
// demo root password off loopback (--insecure-default-credentials), and a
// cluster without TLS, whose node-to-node traffic trusts the network.
func warnInsecure(c Config, log *slog.Logger) {
	if addr := c.PublicDefaultPasswordListener(); addr != "" {
		log.Warn("INSECURE: the root password is the published demo default on a listener that is not on loopback "+
			"(--insecure-default-credentials); anyone who reaches it is root", "address", addr)
	}
	if c.Clustered() && c.TLSCert == "" {
		log.Warn("INSECURE: clustered without TLS (--tls-cert, --tls-key, --tls-ca): the cluster trusts its network. "+
			"Anyone who can see node-to-node traffic can replay a replica or log RPC token for 5 minutes (any call of that "+
			"method, any arguments), and etcd (peer and client URLs) has no authentication: whoever reaches it reads and "+
			"writes all metadata. Run it only on a private network, or turn TLS on (docs/security.md)",
			"rpc_address", c.RPCAddress, "initial_cluster", c.InitialCluster, "meta_endpoints", strings.Join(c.MetaEndpoints, ","))
	}
}

// DefaultPassword reports whether the root password is the published demo
// default.
func (c *Config) DefaultPassword() bool { return c.RootPassword == DefaultRootPassword }

// PublicDefaultPasswordListener returns the S3 or admin address that is
// not on loopback when the root password is the published demo default,
// else "".
func (c *Config) PublicDefaultPasswordListener() string {
	if !c.DefaultPassword() {
		return ""
	}
	for _, addr := range []string{c.S3Address, c.AdminAddress} {
		if !loopbackAddress(addr) {
			return addr
		}
	}
	return ""
}

// loopbackAddress reports whether a listen address host:port binds only
// loopback: localhost or a loopback IP. An empty host binds every
// interface; another name may resolve to anything.
func loopbackAddress(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TLS returns the node's TLS files.
func (c *Config) TLS() tlsconf.Files {
	return tlsconf.Files{CertFile: c.TLSCert, KeyFile: c.TLSKey, CAFile: c.TLSCA}
}

// adminPublicPaths are the admin endpoints an operator may open.
var adminPublicPaths = map[string]string{"metrics": "/metrics", "health": "/v1/health"}

// AdminPublicPaths maps admin_public names to the paths they open.
func AdminPublicPaths(names []string) ([]string, error) {
	var out []string
	for _, n := range names {
		p, ok := adminPublicPaths[strings.TrimSpace(n)]
		if !ok {
			return nil, fmt.Errorf("server: admin_public %q: only \"metrics\" and \"health\" can be served without a signature", n)
		}
		out = append(out, p)
	}
	return out, nil
}

// DefaultPlacement is fitness (f_mult, two-choice): Stargate's policy,
// which writes new egroups to the fastest tier and lets the Curator demote
// cold data (Curator §3.3). It stays free of herding under stale
// statistics (Allen §6) and costs < 1 µs per replica; moop, the OctopusFS
// default, spreads by fullness across tiers instead, which leaves the
// fast tier under-used for tiering to exploit.
const DefaultPlacement = "fitness"

// DemoDevices is the embedded default: emulated mem, ssd and hdd tiers
// under the data directory.
func DemoDevices(dataDir string) []string {
	return []string{
		"mem::256MiB",
		"ssd:" + filepath.Join(dataDir, "dev", "ssd0") + ":2GiB",
		"hdd:" + filepath.Join(dataDir, "dev", "hdd0") + ":8GiB",
		"hdd:" + filepath.Join(dataDir, "dev", "hdd1") + ":8GiB",
	}
}

// Validate checks the configuration and returns parsed device specs.
func (c *Config) Validate() ([]device.Spec, error) {
	if !model.ValidTierName(strings.ToLower(c.NodeID)) && c.NodeID != "" {
		return nil, fmt.Errorf("server: node id %q: use letters, digits, '-' or '_'", c.NodeID)
	}
	if _, err := model.ParseVector(c.DefaultVector); err != nil {
		return nil, fmt.Errorf("server: default vector: %w", err)
	}
	for name, v := range c.StorageClasses {
		if _, err := model.ParseVector(v); err != nil {
			return nil, fmt.Errorf("server: storage class %s: %w", name, err)
		}
	}
	if c.EgroupMaxBytes != 0 && (c.EgroupMaxBytes < 256<<10 || c.EgroupMaxBytes > 1<<30) {
		return nil, fmt.Errorf("server: egroup_max_bytes %d outside [256 KiB, 1 GiB]", c.EgroupMaxBytes)
	}
	if c.BatchMaxBytes < -1 || c.BatchMaxBytes > 128<<10 {
		return nil, fmt.Errorf("server: batch_max_bytes %d outside [-1, 128 KiB] (-1 turns batching off)", c.BatchMaxBytes)
	}
	if err := c.validateRuntime(); err != nil {
		return nil, err
	}
	if c.MetaBlockCacheBytes < 0 || c.MetaBlockCacheBytes > 64<<30 {
		return nil, fmt.Errorf("server: meta_block_cache_bytes %d outside [0, 64 GiB]", c.MetaBlockCacheBytes)
	}
	if err := c.Curator.Transform.validate(); err != nil {
		return nil, err
	}
	if len(c.RootPassword) < 8 {
		return nil, fmt.Errorf("server: root password must be at least 8 characters")
	}
	if addr := c.PublicDefaultPasswordListener(); addr != "" && !c.InsecureDefaultCredentials {
		return nil, fmt.Errorf("server: the root password is the published demo default and %s is not a loopback address: "+
			"set TERRACE_ROOT_PASSWORD (or root_password), or pass --insecure-default-credentials for a throw-away demo", addr)
	}
	if c.MetaRecordFormat != "" && c.MetaRecordFormat != "binary" && c.MetaRecordFormat != "json" {
		return nil, fmt.Errorf("server: meta_record_format %q: want binary or json", c.MetaRecordFormat)
	}
	if c.MetaWritePath != "local" && c.MetaWritePath != "network" {
		return nil, fmt.Errorf("server: meta_write_path %q: want local or network", c.MetaWritePath)
	}
	if c.ReadOrder != "octopus" && c.ReadOrder != "locality" {
		return nil, fmt.Errorf("server: read_order %q: want octopus or locality", c.ReadOrder)
	}
	if c.NetMBps < 0 {
		return nil, fmt.Errorf("server: net_mbps %v must be positive", c.NetMBps)
	}
	if c.Curator.MoveMBps < 0 || c.Curator.MovesPerDevice < 0 || c.Curator.MovesPerLink < 0 {
		return nil, fmt.Errorf("server: curator: move_mbps, moves_per_device and moves_per_link must not be negative")
	}
	if b := c.Curator.ScanMemoryBytes; b < -1 || b > 0 && b < 16<<20 {
		return nil, fmt.Errorf("server: curator: scan_memory_bytes %d: want at least 16 MiB (16777216), 0 for the default (1 GiB) or -1 for no bound", b)
	}
	if _, err := AdminPublicPaths(c.AdminPublic); err != nil {
		return nil, err
	}
	if len(c.Planner.Rules) > 0 {
		if err := curator.ValidateRules(strings.Join(c.Planner.Rules, "\n")); err != nil {
			return nil, fmt.Errorf("server: planner: %w", err)
		}
	}
	if lr := strings.Join(c.Planner.LiveRules, "\n"); lr != "" && lr != curator.LiveRulesOff {
		if err := curator.ValidateRules(lr); err != nil {
			return nil, fmt.Errorf("server: planner: live_rules: %w", err)
		}
	}
	if err := c.Curator.validateTiering(); err != nil {
		return nil, err
	}
	if err := c.TLS().Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if c.Clustered() && c.TLSCert != "" && c.TLSCA == "" {
		return nil, fmt.Errorf("server: a TLS cluster needs --tls-ca: node-to-node traffic is mutual TLS with certificates from the cluster CA")
	}
	if c.TLSCert != "" {
		if err := c.etcdURLsHTTPS(); err != nil {
			return nil, err
		}
	}
	if c.EtcdAdvertisePeerURL != "" && c.EtcdPeerURL == "" {
		return nil, fmt.Errorf("server: --etcd-advertise-peer-url needs --etcd-peer-url (the URL the member listens on)")
	}
	if c.StaticMetaEndpoints && len(c.MetaEndpoints) == 0 {
		return nil, fmt.Errorf("server: --static-meta-endpoints needs --meta-endpoints")
	}
	for id, addr := range c.PeerRPCOverride {
		if id == "" || addr == "" {
			return nil, fmt.Errorf("server: peer_rpc_override %q=%q: want node=host:port", id, addr)
		}
	}
	if c.Clustered() {
		if len(c.ClusterSecret) < 16 {
			return nil, fmt.Errorf("server: cluster mode needs --cluster-secret of at least 16 characters")
		}
		if c.RPCAddress == "" {
			return nil, fmt.Errorf("server: cluster mode needs --rpc-address")
		}
		if c.foundingMember() && (c.EtcdPeerURL == "" || c.EtcdClientURL == "") {
			return nil, fmt.Errorf("server: node %s is an etcd member in --initial-cluster; set --etcd-peer-url and --etcd-client-url", c.NodeID)
		}
	}
	if _, err := device.ParseSyncMode(c.DeviceSync); err != nil {
		return nil, fmt.Errorf("server: device_sync: %w", err)
	}
	var specs []device.Spec
	paths := map[string]bool{}
	for _, s := range c.Devices {
		sp, err := device.ParseSpec(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		if sp.Path != "" && !sp.Remote() {
			abs, _ := filepath.Abs(sp.Path)
			if paths[abs] {
				return nil, fmt.Errorf("server: device path %s listed twice", sp.Path)
			}
			paths[abs] = true
		}
		if sp.Profile == "" && c.Emulate {
			if _, ok := device.Profiles[string(sp.Tier)]; ok {
				sp.Profile = string(sp.Tier)
			}
		}
		specs = append(specs, sp)
	}
	if len(specs) == 0 {
		return nil, fmt.Errorf("server: no devices configured")
	}
	return specs, nil
}

// CuratorConfig tunes background management.
type CuratorConfig struct {
	Disabled      bool          `yaml:"disabled"`
	PartialEvery  time.Duration `yaml:"partial_every"`
	FullEvery     time.Duration `yaml:"full_every"`
	NodeDownAfter time.Duration `yaml:"node_down_after"`
	GarbageGrace  time.Duration `yaml:"garbage_grace"`
	MoveMBps      float64       `yaml:"move_mbps"`
	// MovesPerDevice and MovesPerLink bound concurrent background moves
	// reading or writing one device, and between one pair of nodes
	// (defaults 2 and 4).
	MovesPerDevice int   `yaml:"moves_per_device"`
	MovesPerLink   int   `yaml:"moves_per_link"`
	Scrub          *bool `yaml:"scrub"`
	// Tiering turns automatic tiering and disk balancing on (default on).
	Tiering *bool `yaml:"tiering"`
	// Tier thresholds (fractions, e.g. 0.75); zero means the paper's.
	TierDownAbove     float64       `yaml:"tier_down_above"`
	TierDestBelow     float64       `yaml:"tier_dest_below"`
	TierReduce        float64       `yaml:"tier_reduce"`
	BalanceMean       float64       `yaml:"balance_mean"`
	BalanceSpread     float64       `yaml:"balance_spread"`
	PromoteReads      int64         `yaml:"promote_reads"`
	HotWindow         time.Duration `yaml:"hot_window"`
	TierCheckInterval time.Duration `yaml:"tier_check_interval"`
	// JobTimeLimit bounds the task execution of one job.
	JobTimeLimit time.Duration `yaml:"job_time_limit"`
	// SealIdle seals open egroups idle this long before each scan.
	SealIdle time.Duration `yaml:"seal_idle"`
	// NodeQueues hands the moves a scan job could not start within
	// job_time_limit to the durable queue of the node that runs them
	// (default on; docs/curator.md "Node task queues").
	NodeQueues *bool `yaml:"node_queues"`
	// MasterScansAlone keeps every scan partition's map on the Curator
	// master instead of spreading partitions over the cluster's nodes
	// (the default without a balancer policy; docs/curator.md).
	MasterScansAlone bool `yaml:"master_scans_alone"`
	// ShuffleReferences joins a full scan's extent references with the
	// extents on the nodes that map the extent partitions, instead of
	// sending every reference to the master (default on; off: the master
	// joins them; docs/curator.md "The shuffle").
	ShuffleReferences *bool `yaml:"shuffle_references"`
	// ScanMemoryBytes bounds the heap a full scan's extent records and
	// references take on the master (64 and 16 bytes per extent); past
	// it they live in memory-mapped files under <data_dir>/curator-spill
	// that the kernel writes out under memory pressure (default 1 GiB;
	// -1: no bound; docs/curator.md "Memory").
	ScanMemoryBytes int64 `yaml:"scan_memory_bytes"`
	// TieringScheduler decides when tiering runs: threshold (default: f,
	// d, h) or qlearning, the learned scheduler; TieringModel is its
	// starting model, a JSON file from `terrace sim tiering --out`
	// (default: the built-in one). See docs/qlearning.md.
	TieringScheduler string `yaml:"tiering_scheduler"`
	TieringModel     string `yaml:"tiering_model"`
	// Transform holds the thresholds of truncation and compression of
	// cold data (transform.go, docs/transforms.md).
	Transform TransformConfig `yaml:"transform"`
}
