package node

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/device"
	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/store"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Config is what the node gives the log service.
type Config struct {
	// Self is this node's ID; SelfAddress its RPC address (where the Log
	// service is served).
	Self        string
	SelfAddress string
	Devices     []*device.Device
	KV          meta.KV
	// Etcd is the cluster's etcd client; nil on a single node, which then
	// hosts every sequencer itself.
	Etcd *clientv3.Client
	// Secret authenticates calls to peers (the cluster secret); TLS, when
	// set, is the mutual-TLS client configuration for peers.
	Secret []byte
	TLS    *tls.Config
	// Policy and Snapshot place new segments' stripes, like egroups.
	Policy   placement.Policy
	Snapshot func() *model.Snapshot
	// Address returns a node's RPC address.
	Address func(node string) (string, bool)
	Logger  *slog.Logger
	Options Options
}

// Options are the service's tunables. Zero means the default.
type Options struct {
	// HostLeaseTTL is the etcd lease the sequencer host holds: when a host
	// dies, another takes over this long after its last keep-alive. etcd's
	// floor with Terrace's 1 s election timeout is 2 s.
	HostLeaseTTL time.Duration
	// ClaimFallback: a log without a host for this long is claimed by any
	// node, not only the one the balancer chose (which may be dead).
	ClaimFallback time.Duration
	// PeerTimeout bounds one storage call to a peer (forward, seal,
	// settle copy). A dead peer's refused connection fails at once; this
	// is for a hung one.
	PeerTimeout time.Duration
	// ProbeTimeout bounds the ping that decides whether a reported node is
	// unreachable.
	ProbeTimeout time.Duration
	// LeaseGrace is how long after a lease's hold time the host waits for
	// its client to return it before filling its unused positions.
	LeaseGrace time.Duration
	// RepairEvery is how often the host looks for stale replicas to bring
	// back.
	RepairEvery time.Duration
	// ReplaceAfter is how long a node must be down before the hosts of
	// logs re-home its replicas of closed segments onto live nodes
	// (repair then copies the stripes there); negative never does. Like
	// the Curator's node_down_after: long enough that a restart or a
	// short outage is waited for.
	ReplaceAfter time.Duration
	// SegmentBytes is the space placement reserves for a new stripe
	// replica (its expected size before the log is trimmed).
	SegmentBytes int64
	// JournalFileBytes is the store's journal file size.
	JournalFileBytes int64
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.HostLeaseTTL == 0 {
		o.HostLeaseTTL = 2 * time.Second
	}
	if o.ClaimFallback == 0 {
		o.ClaimFallback = 2 * time.Second
	}
	if o.PeerTimeout == 0 {
		o.PeerTimeout = 5 * time.Second
	}
	if o.ProbeTimeout == 0 {
		o.ProbeTimeout = 700 * time.Millisecond
	}
	if o.LeaseGrace == 0 {
		o.LeaseGrace = time.Second
	}
	if o.RepairEvery == 0 {
		o.RepairEvery = 2 * time.Second
	}
	if o.ReplaceAfter == 0 {
		o.ReplaceAfter = 15 * time.Minute
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = 64 << 20
	}
}

// Service is the shared log on one node: the Log gRPC service (storage,
// sequencer, metadata), the sequencer host, recovery and repair. It is
// registered on the gRPC server before it starts (New), and serves only
// after Start; until then calls answer Unavailable.
type Service struct {
	zlogpb.UnimplementedLogServer

	cfg     Config
	log     *slog.Logger
	started atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	store   *store.Store
	cache   *cache
	peers   *peers
	client  *client.Client // the node's own client (convenience calls, lease sweeper)
	metrics *svcMetrics

	hostMu   sync.Mutex
	hosted   map[string]*sequencer
	lastHost map[string]string    // previous host of each log (excluded when choosing)
	noHost   map[string]time.Time // since when a log has had no host
	lease    clientv3.LeaseID     // this node's host lease (cluster)
	leaseGen uint64
	deposing map[int64]bool // host leases this node is revoking

	rngMu sync.Mutex
	rng   *rand.Rand

	downMu    sync.Mutex
	downSince map[string]time.Time // when this node first saw each node down

	// afterTrimTail, when set (tests only), runs in TrimLog between
	// reading the tail and committing the trim point.
	afterTrimTail func()
}

// New returns a service to register on a gRPC server; Start brings it up.
func New() *Service { return &Service{} }

// Register registers the service on a gRPC server.
func (s *Service) Register(g *grpc.Server) { zlogpb.RegisterLogServer(g, s) }

// Start opens the store on the devices, loads the metadata and starts the
// background loops (cache, host manager, sweeper, repair, GC).
func (s *Service) Start(cfg Config) error {
	cfg.Options.EnsureDefaults()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s.cfg = cfg
	s.log = cfg.Logger.With("component", "log")
	st, err := store.Open(cfg.Devices, store.Options{JournalFileBytes: cfg.Options.JournalFileBytes, Logger: s.log})
	if err != nil {
		return err
	}
	s.store = st
	s.cache = newCache(cfg.KV, s.log)
	s.peers = newPeers(cfg.Self, cfg.Secret, cfg.TLS)
	s.hosted = map[string]*sequencer{}
	s.lastHost = map[string]string{}
	s.noHost = map[string]time.Time{}
	s.deposing = map[int64]bool{}
	s.metrics = newSvcMetrics()
	s.rng = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0x5eed))
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cl, err := client.New(client.Config{Endpoints: []string{cfg.SelfAddress}, NodeID: cfg.Self, Secret: cfg.Secret, TLS: cfg.TLS, Logger: s.log})
	if err != nil {
		st.Close()
		return err
	}
	s.client = cl
	s.started.Store(true)
	s.run(func(ctx context.Context) { s.cache.run(ctx) })
	// Wait (bounded) for the first metadata scan so the node starts with
	// a view of every log.
	deadline := time.Now().Add(10 * time.Second)
	for !s.cache.isLoaded() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	s.run(s.hostLoop)
	s.run(s.gcLoop)
	s.log.Info("shared log service started", "replicas", len(st.Replicas()))
	return nil
}

func (s *Service) run(f func(ctx context.Context)) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// Close stops the loops, steps down from hosted sequencers and closes the
// store.
func (s *Service) Close() {
	if !s.started.Swap(false) {
		return
	}
	s.cancel()
	s.hostMu.Lock()
	for _, q := range s.hosted {
		q.stop()
	}
	s.hostMu.Unlock()
	s.wg.Wait()
	s.client.Close()
	s.peers.close()
	s.store.Close()
}

// Collectors returns the service's and the store's metrics.
func (s *Service) Collectors() []prometheus.Collector {
	return append(s.metrics.collectors(), s.store.Collectors()...)
}

// ready is the guard every RPC starts with.
func (s *Service) ready() error {
	if !s.started.Load() {
		return status.Error(codes.Unavailable, "log: service starting")
	}
	return nil
}

// Client returns the node's own log client.
func (s *Service) Client() *client.Client { return s.client }

// grpcErr maps an internal error to a gRPC status, keeping client errors'
// codes.
func grpcErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, client.ErrNoSuchLog):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, client.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, client.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}

func fmtNode(n string) string {
	if n == "" {
		return "(none)"
	}
	return n
}
