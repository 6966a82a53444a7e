package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigDefaultsAndValidation(t *testing.T) {
	var c Config
	c.EnsureDefaults()
	specs, err := c.Validate()
	if err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if len(specs) != 4 || c.Placement != DefaultPlacement || c.S3Address != DefaultS3Address || !c.Emulate {
		t.Fatalf("demo defaults: %d devices, placement %s, s3 %s, emulate %v", len(specs), c.Placement, c.S3Address, c.Emulate)
	}
	for _, sp := range specs {
		if sp.Profile == "" {
			t.Fatalf("demo device %s has no emulation profile", sp)
		}
	}
	bad := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"bad vector", func(c *Config) { c.DefaultVector = "ssd=x" }, "default vector"},
		{"short password", func(c *Config) { c.RootPassword = "abc" }, "at least 8"},
		{"duplicate path", func(c *Config) { c.Devices = []string{"ssd:/d/x:1GiB", "hdd:/d/x:1GiB"} }, "twice"},
		{"bad device", func(c *Config) { c.Devices = []string{"ssd:/d/x"} }, "want tier:path:capacity"},
		{"cluster without secret", func(c *Config) { c.InitialCluster = "n1=http://127.0.0.1:2380"; c.RPCAddress = "127.0.0.1:7000" }, "cluster-secret"},
		{"member without urls", func(c *Config) {
			c.InitialCluster = "n1=http://127.0.0.1:2380"
			c.RPCAddress = "127.0.0.1:7000"
			c.ClusterSecret = strings.Repeat("s", 16)
		}, "etcd-peer-url"},
		{"bad class", func(c *Config) { c.StorageClasses = map[string]string{"GOLD": "nope"} }, "storage class"},
		{"unknown public admin endpoint", func(c *Config) { c.AdminPublic = []string{"metrics", "status"} }, "admin_public"},
		{"unknown planner rule", func(c *Config) { c.Planner.Rules = []string{"load_balanced spread=0.2", "be_fast"} }, "be_fast"},
		{"bad planner parameter", func(c *Config) { c.Planner.Rules = []string{"load_balanced spread=lots"} }, "spread"},
		{"bad live rule", func(c *Config) { c.Planner.LiveRules = []string{"disk_balanced mean=2"} }, "mean"},
		{"bad device sync", func(c *Config) { c.DeviceSync = "fdatasync" }, "device_sync"},
		{"tiny egroups", func(c *Config) { c.EgroupMaxBytes = 4096 }, "egroup_max_bytes"},
		{"huge egroups", func(c *Config) { c.EgroupMaxBytes = 2 << 30 }, "egroup_max_bytes"},
		{"huge batches", func(c *Config) { c.BatchMaxBytes = 1 << 20 }, "batch_max_bytes"},
		{"negative batches", func(c *Config) { c.BatchMaxBytes = -2 }, "batch_max_bytes"},
		{"negative meta cache", func(c *Config) { c.MetaBlockCacheBytes = -1 }, "meta_block_cache_bytes"},
		{"bad meta write path", func(c *Config) { c.MetaWritePath = "raft" }, "meta_write_path"},
		{"bad record format", func(c *Config) { c.MetaRecordFormat = "protobuf" }, "meta_record_format"},
		{"gc percent too low", func(c *Config) { c.GCPercent = 5 }, "gc_percent"},
		{"tiny memory limit", func(c *Config) { c.MemoryLimitBytes = 1 << 20 }, "memory_limit_bytes"},
		{"tiny scan memory", func(c *Config) { c.Curator.ScanMemoryBytes = 4096 }, "scan_memory_bytes"},
		{"negative scan memory", func(c *Config) { c.Curator.ScanMemoryBytes = -2 }, "scan_memory_bytes"},
		{"learned scheduler with tiering off", func(c *Config) {
			c.Curator.Tiering, c.Curator.TieringScheduler = new(false), "qlearning"
		}, "tiering: false"},
	}
	for _, b := range bad {
		c := Config{}
		c.EnsureDefaults()
		b.mod(&c)
		if _, err := c.Validate(); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v, want an error containing %q", b.name, err, b.want)
		}
	}
	// Tiering off with the threshold scheduler, named or not, asks for
	// nothing contradictory: the scheduler is the default.
	for _, sched := range []string{"", "threshold"} {
		c := Config{}
		c.EnsureDefaults()
		c.Curator.Tiering, c.Curator.TieringScheduler = new(false), sched
		if _, err := c.Validate(); err != nil {
			t.Errorf("tiering: false with tiering_scheduler %q: %v", sched, err)
		}
	}
	// Node "node1" joining a cluster whose founders are "a-node1" and
	// "b-node1" is not a founding member: it needs no etcd URLs (a
	// substring match said it did).
	j := Config{NodeID: "node1", InitialCluster: "a-node1=http://127.0.0.1:2380,b-node1=http://127.0.0.1:2381", RPCAddress: "127.0.0.1:7000",
		ClusterSecret: strings.Repeat("s", 16)}
	j.EnsureDefaults()
	if _, err := j.Validate(); err != nil {
		t.Fatalf("joining node node1 of founders a-node1, b-node1: %v", err)
	}
}

func TestConfigFileEnvPrecedence(t *testing.T) {
	p := filepath.Join(t.TempDir(), "t.yaml")
	os.WriteFile(p, []byte("node_id: fromfile\ns3_address: 127.0.0.1:1111\ncurator:\n  partial_every: 5s\n"), 0o644)
	c, err := LoadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"TERRACE_S3_ADDRESS": "127.0.0.1:2222", "TERRACE_DEVICES": "ssd:/a:1GiB,hdd:/b:2GiB"}
	c.ApplyEnv(func(k string) string { return env[k] })
	if c.NodeID != "fromfile" || c.S3Address != "127.0.0.1:2222" || len(c.Devices) != 2 || c.Curator.PartialEvery.Seconds() != 5 {
		t.Fatalf("merged config: %+v", c)
	}
	os.WriteFile(p, []byte("no_such_key: 1\n"), 0o644)
	if _, err := LoadFile(p); err == nil {
		t.Fatal("unknown YAML key accepted")
	}
}

func TestExtentSizeFollowsSmallEgroups(t *testing.T) {
	for _, c := range []struct{ egroup, want int64 }{{0, 0}, {1 << 20, 1 << 20}, {4 << 20, 0}, {64 << 20, 0}} {
		if got := extentSizeFor(c.egroup); got != c.want {
			t.Errorf("egroup %d: extent %d, want %d", c.egroup, got, c.want)
		}
	}
}

// A cluster in a rolling upgrade (meta_record_format: json) keeps every
// egroup record exact, as older versions expect; otherwise the object
// layer's default lag applies.
func TestEgroupRecordLagFollowsTheRecordFormat(t *testing.T) {
	for format, want := range map[string]int64{"": 0, "binary": 0, "json": -1} {
		if got := egroupRecordLag(Config{MetaRecordFormat: format}); got != want {
			t.Errorf("meta_record_format %q: egroup record lag %d, want %d", format, got, want)
		}
	}
}
