package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/console"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/decide"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/lifecycle"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy"
	"github.com/terrace-storage/terrace/internal/sse"
	"github.com/terrace-storage/terrace/internal/users"
)

// Node is a running Terrace node.
type Node struct {
	Config  Config
	Log     *slog.Logger
	KV      meta.KV
	Local   *object.Local
	Layer   *object.Layer
	Devices []*device.Device
	Reg     *prometheus.Registry
	// Keys is the master keyring (SSE-S3 data keys, user secrets).
	Keys *sse.Keyring
	// Users are the S3 users other than root.
	Users *users.Store
	// Lifecycle applies S3 lifecycle rules (lifecycle.go).
	Lifecycle *lifecycle.Runner

	admin *http.Server
	// adminKeys authenticate admin API requests: the root account, then
	// whatever AddAdminKeyring adds (admin users of the IAM store).
	adminKeys adminauth.Keyrings
	cluster   *clusterParts
	Curator   *curator.Curator
	elector   *cluster.Elector
	bgStop    context.CancelFunc

	// Policies is the programmable-policy manager (policy.go);
	// basePlacement is the configured placement policy the fitness hook
	// falls back to.
	Policies      *policy.Manager
	basePlacement placement.Policy
	policyStop    context.CancelFunc

	// shuffle keeps the references other masters' scans shuffle to this
	// node as a reducer (curator.ShuffleStore).
	shuffle    *curator.ShuffleStore
	mapWork    *mapWorkMetrics
	peerOnce   sync.Once
	peerClient *http.Client
	peerScheme string
	logs       *logParts        // shared log (zlog.go)
	sampler    *console.Sampler // the web console's metric history
}

// AddAdminKeyring lets more keys sign admin API requests (call before
// Serve).
func (n *Node) AddAdminKeyring(k adminauth.Keyring) { n.adminKeys = append(n.adminKeys, k) }

// S3Starter starts the S3 gateway; it is injected so that this package
// does not depend on the gateway's (large) import graph in tests.
type S3Starter func(ctx context.Context, n *Node) error

// Open builds a node: devices, metadata, object layer and recovery. It
// serves nothing yet.
func Open(ctx context.Context, cfg Config, log *slog.Logger) (*Node, error) {
	cfg.EnsureDefaults()
	specs, err := cfg.Validate()
	if err != nil {
		return nil, err
	}
	warnInsecure(cfg, log)
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("server: data dir: %w", err)
	}
	n := &Node{Config: cfg, Log: log, Reg: prometheus.NewRegistry()}
	n.adminKeys = adminauth.Keyrings{adminauth.StaticKeyring{cfg.RootUser: {Secret: cfg.RootPassword, Admin: true}}}
	if err := n.openKeys(os.Getenv); err != nil {
		return nil, err
	}
	counts := map[model.Tier]int{}
	for _, sp := range specs {
		id := model.DeviceID(fmt.Sprintf("%s/%s%d", cfg.NodeID, sp.Tier, counts[sp.Tier]))
		counts[sp.Tier]++
		if sp.Path != "" && !sp.Remote() {
			if err := claimDevice(sp.Path, id); err != nil {
				n.closeDevices()
				return nil, err
			}
		}
		d, err := device.Open(id, sp)
		if err != nil {
			n.closeDevices()
			return nil, err
		}
		if mode, _ := device.ParseSyncMode(cfg.DeviceSync); sp.Path != "" && !sp.Remote() {
			if err := d.SetSyncMode(mode); err != nil {
				n.closeDevices()
				return nil, fmt.Errorf("server: device_sync: %w", err)
			}
		}
		if err := d.Probe(int(cfg.ProbeBytes)); err != nil {
			n.closeDevices()
			return nil, fmt.Errorf("server: probe %s: %w", id, err)
		}
		st := d.Stats()
		log.Info("device ready", "id", id, "tier", sp.Tier, "path", sp.DisplayPath(), "capacity", device.FormatBytes(sp.Capacity), "sync", d.SyncMode(),
			"used", device.FormatBytes(st.UsedBytes), "profile", sp.Profile,
			"read_MBps", int(st.ReadBps/1e6), "write_MBps", int(st.WriteBps/1e6))
		n.Devices = append(n.Devices, d)
	}
	n.Local = object.NewLocal(model.NodeID(cfg.NodeID), cfg.Rack, n.Devices)
	var kv meta.KV
	var rio object.ReplicaIO = n.Local
	var topo object.Topology = n.Local
	if cfg.Clustered() {
		kv, rio, topo, err = n.openCluster(ctx)
		if err != nil {
			n.cluster.close()
			return nil, err
		}
	} else {
		kv, err = meta.OpenPebbleWith(filepath.Join(cfg.DataDir, "meta"), meta.PebbleOptions{BlockCacheBytes: cfg.MetaBlockCacheBytes})
		if err != nil {
			return nil, err
		}
	}
	n.KV = kv
	n.Users = users.New(kv, n.Keys, cfg.RootUser)
	n.AddAdminKeyring(userKeyring{n.Users})
	pol, err := newPolicy(cfg.Placement)
	if err != nil {
		kv.Close()
		return nil, err
	}
	if pol, err = n.openPolicies(kv, pol); err != nil {
		kv.Close()
		return nil, err
	}
	classes := object.DefaultClasses()
	for name, v := range cfg.StorageClasses {
		classes[strings.ToUpper(name)] = model.MustParseVector(v)
	}
	layer, err := object.New(kv, rio, topo, object.Options{
		Node:           model.NodeID(cfg.NodeID),
		DefaultVector:  model.MustParseVector(cfg.DefaultVector),
		Classes:        classes,
		Policy:         pol,
		StatsInterval:  cfg.StatsInterval,
		AccessWindow:   cfg.Curator.HotWindow,
		HotReads:       hotReads(cfg.Curator),
		EgroupMaxBytes: cfg.EgroupMaxBytes,
		BatchMaxBytes:  cfg.BatchMaxBytes,
		OrphanGrace:    orphanGrace(cfg),
		// The periodic orphan sweep asks the other nodes about files
		// whose egroup has no record yet (orphans.go).
		OrphanHolds: n.orphanHoldsFor(cfg),
		// A node of an older version seals a down writer's egroup at the
		// length its record states; while one may run (a rolling
		// upgrade), every commit keeps that length exact.
		EgroupRecordLag: egroupRecordLag(cfg),
		// Extents never straddle egroups: a small egroup takes small extents.
		ExtentMaxBytes: extentSizeFor(cfg.EgroupMaxBytes),
		ReadOrder:      cfg.ReadOrder,
		Logger:         log,
	})
	if err != nil {
		n.policyStop()
		kv.Close()
		return nil, err
	}
	n.Layer = layer
	start := time.Now()
	rep, err := recoverRetry(ctx, func(ctx context.Context) (object.RecoveryReport, error) { return layer.Recover(ctx, n.Local) },
		recoveryRetryLimit(cfg), log)
	if err != nil {
		n.policyStop()
		layer.Close()
		kv.Close()
		return nil, fmt.Errorf("server: recovery: %w", err)
	}
	log.Info("recovery done", "took", time.Since(start).Round(time.Millisecond), "report", rep.String())
	if n.cluster != nil {
		n.cluster.members.SetLatency(layer.ForegroundLatency)
		if err := n.startMembership(); err != nil {
			n.Close()
			return nil, err
		}
	}
	if err := n.openLog(); err != nil {
		n.Close()
		return nil, err
	}
	n.Reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	n.Reg.MustRegister(layer.Collectors()...)
	n.Reg.MustRegister(newDeviceCollector(n))
	if sr, ok := kv.(meta.StatsReporter); ok {
		n.Reg.MustRegister(newMetaCollector(sr))
	}
	n.openCurator(pol, topo)
	n.openLifecycle()
	n.openConsole()
	return n, nil
}

// openCurator builds the Curator; Serve runs it.
func (n *Node) openCurator(pol placement.Policy, topo object.Topology) {
	cc := n.Config.Curator
	scrub := true
	if cc.Scrub != nil {
		scrub = *cc.Scrub
	}
	var leader curator.Leader
	if n.cluster != nil {
		n.elector = cluster.NewElector(n.cluster.client, "curator", n.Config.NodeID, n.Log)
		leader = n.elector
	}
	local := map[model.DeviceID]*device.Device{}
	for _, d := range n.Devices {
		local[d.ID()] = d
	}
	load := func(id model.DeviceID) int {
		if d, ok := local[id]; ok {
			return d.Stats().QueueLen
		}
		return 0
	}
	tiering := true
	if cc.Tiering != nil {
		tiering = *cc.Tiering
	}
	sched, signals := n.tieringScheduler(n.Layer)
	n.Curator = curator.New(n.Layer, n.KV, topo, pol, leader, load, n.withPolicyHooks(curator.Options{
		TieringScheduler: sched, TierSignals: signals,
		Node:          n.Config.NodeID,
		PlannerRules:  strings.Join(n.Config.Planner.Rules, "\n"),
		LiveRules:     strings.Join(n.Config.Planner.LiveRules, "\n"),
		ClientLatency: n.clientLatency(),
		Decide:        decide.Options{NodeDownAfter: cc.NodeDownAfter, GarbageGrace: cc.GarbageGrace, Transform: cc.Transform.options()},
		Tiering:       tiering,
		Tier: decide.TierOptions{DownAbove: cc.TierDownAbove, DestBelow: cc.TierDestBelow, Reduce: cc.TierReduce,
			BalanceMean: cc.BalanceMean, BalanceSpread: cc.BalanceSpread, PromoteReads: cc.PromoteReads,
			HotWindow: cc.HotWindow, MinInterval: cc.TierCheckInterval},
		PartialEvery:       cc.PartialEvery,
		SealIdleBeforeScan: cc.SealIdle,
		JobTimeLimit:       cc.JobTimeLimit,
		NodeQueues:         cc.NodeQueues == nil || *cc.NodeQueues,
		FullEvery:          cc.FullEvery,
		MoveBytesPerSec:    cc.MoveMBps * 1e6,
		Limits:             actuate.Limits{PerSource: cc.MovesPerDevice, PerDest: cc.MovesPerDevice, PerLink: cc.MovesPerLink},
		Scrub:              scrub,
		ScanMemoryBytes:    cc.ScanMemoryBytes,
		ScanSpillDir:       n.scanSpillDir(),
		Logger:             n.Log.With("component", "curator"),
	}))
	n.Reg.MustRegister(n.Curator.Collectors()...)
}

// scanSpillDir is where the Curator's full scans spill their extent
// arrays: a directory of the node's own, emptied at start-up (the files
// are unlinked as soon as they are made, so only a crash between the two
// leaves one).
func (n *Node) scanSpillDir() string {
	dir := filepath.Join(n.Config.DataDir, "curator-spill")
	if err := os.RemoveAll(dir); err != nil {
		n.Log.Warn("curator: clear the scan spill directory", "dir", dir, "err", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		n.Log.Warn("curator: scan spill directory; spilling to the system's temporary directory", "dir", dir, "err", err)
		return ""
	}
	return dir
}

// claimDevice writes (or checks) the identity file that ties a directory
// to a device ID, so swapped or mistyped paths are caught at start-up.
func claimDevice(dir string, id model.DeviceID) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("server: device dir %s: %w", dir, err)
	}
	p := filepath.Join(dir, ".terrace-device")
	b, err := os.ReadFile(p)
	if err == nil {
		if got := strings.TrimSpace(string(b)); got != string(id) {
			return fmt.Errorf("server: %s belongs to device %s, configured as %s (device order changed?)", dir, got, id)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.WriteFile(p, []byte(string(id)+"\n"), 0o644)
}

func (n *Node) closeDevices() {}

// Serve runs the admin API and the S3 gateway until ctx ends.
func (n *Node) Serve(ctx context.Context, startS3 S3Starter) error {
	ln, err := net.Listen("tcp", n.Config.AdminAddress)
	if err != nil {
		return fmt.Errorf("server: admin listen %s: %w", n.Config.AdminAddress, err)
	}
	if n.Config.TLSCert != "" {
		tc, err := n.Config.TLS().Server()
		if err != nil {
			ln.Close()
			return err
		}
		ln = tls.NewListener(ln, tc)
	}
	n.admin = &http.Server{Handler: n.AdminHandler(), ReadHeaderTimeout: 10 * time.Second}
	n.admin.RegisterOnShutdown(n.sampler.Close) // ends the console's live-update streams
	errc := make(chan error, 2)
	go func() {
		if err := n.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("server: admin: %w", err)
		}
	}()
	n.Log.Info("admin API listening", "address", ln.Addr().String(), "console", n.ConsoleURL())
	bg, stop := context.WithCancel(ctx)
	n.bgStop = stop
	defer stop()
	if n.elector != nil {
		go n.elector.Run(bg)
	}
	if !n.Config.Curator.Disabled {
		go n.Curator.Run(bg)
	} else if n.Config.Curator.TieringScheduler != "" && n.Config.Curator.TieringScheduler != tiersched.NameThreshold {
		// Disabled is a switch an operator flips for a while and back;
		// the rest of the section stays valid, but say what it means.
		n.Log.Warn("curator disabled: the configured tiering scheduler will not run until it is enabled", "tiering_scheduler", n.Config.Curator.TieringScheduler)
	}
	if !n.Config.Lifecycle.Disabled {
		go n.Lifecycle.Run(bg)
	}
	go n.sampler.Run(bg)
	if n.Config.DeviceCheckEvery > 0 {
		go n.checkDevices(bg, n.Config.DeviceCheckEvery)
	}
	n.startOrphanSweep(bg)
	if startS3 != nil {
		go func() {
			if err := startS3(ctx, n); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("server: s3: %w", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = n.admin.Shutdown(sctx)
	return err
}

// Close flushes and closes everything.
func (n *Node) Close() error {
	var errs []error
	if n.policyStop != nil {
		n.policyStop()
	}
	n.closeLog()
	if n.Layer != nil {
		errs = append(errs, n.Layer.Close())
	}
	if n.cluster != nil {
		n.cluster.close()
	} else if n.KV != nil {
		errs = append(errs, n.KV.Close())
	}
	return errors.Join(errs...)
}

type deviceCollector struct {
	n                          *Node
	capacity, used, queue, str *prometheus.Desc
}

func newDeviceCollector(n *Node) *deviceCollector {
	l := []string{"device", "tier"}
	return &deviceCollector{n: n,
		capacity: prometheus.NewDesc("terrace_device_capacity_bytes", "Device capacity.", l, nil),
		used:     prometheus.NewDesc("terrace_device_used_bytes", "Bytes used on the device.", l, nil),
		queue:    prometheus.NewDesc("terrace_device_queue_length", "I/O operations in flight.", l, nil),
		str:      prometheus.NewDesc("terrace_device_active_streams", "Replica files with a read, write or sync in flight (OctopusFS NrConn of the device).", l, nil),
	}
}

func (c *deviceCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.capacity
	ch <- c.used
	ch <- c.queue
	ch <- c.str
}

func (c *deviceCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.n.Devices {
		s := d.Stats()
		lv := []string{string(s.ID), string(s.Tier)}
		ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(s.CapacityBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.UsedBytes), lv...)
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(s.QueueLen), lv...)
		ch <- prometheus.MustNewConstMetric(c.str, prometheus.GaugeValue, float64(s.ActiveStreams), lv...)
	}
}

// metaCollector exports the metadata store's work counters.
type metaCollector struct {
	kv                                                meta.StatsReporter
	reads, commits, txns, fallbackRead, fallbackWrite *prometheus.Desc
}

func newMetaCollector(kv meta.StatsReporter) *metaCollector {
	return &metaCollector{kv: kv,
		reads:        prometheus.NewDesc("terrace_meta_reads_total", "Metadata reads (point reads and range scans) this node issued.", nil, nil),
		commits:      prometheus.NewDesc("terrace_meta_commits_total", "Metadata transactions this node requested.", nil, nil),
		txns:         prometheus.NewDesc("terrace_meta_backend_txns_total", "Transactions the metadata store executed for this node (etcd: fewer than commits when group commit merged them).", nil, nil),
		fallbackRead: prometheus.NewDesc("terrace_meta_local_read_fallbacks_total", "Reads the node's own etcd member failed and another member answered.", nil, nil),
		fallbackWrite: prometheus.NewDesc("terrace_meta_local_write_fallbacks_total",
			"Transactions the node's own etcd member refused before proposing them (no leader, overloaded) and another member was sent.", nil, nil),
	}
}

func (c *metaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.reads
	ch <- c.commits
	ch <- c.txns
	ch <- c.fallbackRead
	ch <- c.fallbackWrite
}

func (c *metaCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.kv.KVStats()
	ch <- prometheus.MustNewConstMetric(c.reads, prometheus.CounterValue, float64(s.Reads))
	ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(s.Commits))
	ch <- prometheus.MustNewConstMetric(c.txns, prometheus.CounterValue, float64(s.BackendTxns))
	ch <- prometheus.MustNewConstMetric(c.fallbackRead, prometheus.CounterValue, float64(s.LocalReadFallbacks))
	ch <- prometheus.MustNewConstMetric(c.fallbackWrite, prometheus.CounterValue, float64(s.LocalWriteFallbacks))
}

// newPolicy builds the configured placement policy.
// name is a policy with optional parameters, e.g. "fitness selection=sus".
func newPolicy(name string) (placement.Policy, error) {
	c, err := placement.ParseConfig(name)
	if err != nil {
		return nil, err
	}
	return placement.New(c)
}

// extentSizeFor is the extent size for an egroup size: the 4 MiB default,
// or the egroup size when that is smaller (0 means the default).
func extentSizeFor(egroupMax int64) int64 {
	if egroupMax > 0 && egroupMax < 4<<20 {
		return egroupMax
	}
	return 0
}

// orphanGrace is how long start-up recovery waits before removing replica
// files that have no egroup record: at once on a single node, two minutes
// in a cluster, where a peer may be between writing such a file here and
// committing its record (writes that take longer fail and re-place).
func orphanGrace(cfg Config) time.Duration {
	if cfg.Clustered() {
		return 2 * time.Minute
	}
	return 0
}

// hotReads is the window read count at which the access tracker asks the
// Curator master for a promotion: promote_reads (default 3) when tiering
// is on, else 0 (no requests). A tiering policy may tune promote_reads;
// the decision applies the tuned value to every request.
func hotReads(cc CuratorConfig) int64 {
	if cc.Tiering != nil && !*cc.Tiering {
		return 0
	}
	if cc.PromoteReads > 0 {
		return cc.PromoteReads
	}
	return decide.DefaultPromoteReads
}

// checkDevices runs every device's health check each period until ctx
// ends (Config.DeviceCheckEvery). A device that fails it is marked failed
// by the check itself; the next heartbeat tells the cluster, and the
// Curator's failure-driven partial scan re-protects its egroups.
func (n *Node) checkDevices(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, d := range n.Devices {
			if d.Failed() {
				continue
			}
			if err := d.Check(); err != nil && d.Failed() {
				n.Log.Error("device failed its health check; marked failed", "device", d.ID(), "err", err)
			}
		}
	}
}

// clientLatency is the actuator's back-off signal: in a cluster the worst
// node's recent client latency against its baseline (clients may enter at
// any node while the Curator master moves data from another); on a single
// node its own.
func (n *Node) clientLatency() func() (recent, baseline time.Duration) {
	if n.cluster != nil {
		return n.cluster.members.ClusterLatency
	}
	return n.Layer.ForegroundLatency
}

// egroupRecordLag is object.Options.EgroupRecordLag for cfg: the default,
// unless the cluster is in a rolling upgrade (meta_record_format: json),
// when every commit rewrites its egroup records as older versions expect.
func egroupRecordLag(cfg Config) int64 {
	if cfg.MetaRecordFormat == "json" {
		return -1
	}
	return 0
}
