package client

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Errors.
var (
	ErrNoSuchLog  = errors.New("log: no such log")
	ErrExists     = errors.New("log: log already exists")
	ErrInvalid    = errors.New("log: invalid argument")
	ErrNotWritten = errors.New("log: position not written")
	ErrTrimmed    = errors.New("log: position trimmed")
	// ErrUnavailable: the operation kept failing (nodes unreachable,
	// recovery not finishing) until its retry time ran out.
	ErrUnavailable = errors.New("log: unavailable")
	ErrClosed      = errors.New("log: client closed")
)

func errf(f string, a ...any) error { return fmt.Errorf(f, a...) }

// Kind is what a position holds.
type Kind uint8

// Kinds (the protocol's values).
const (
	KindData Kind = 1
	KindFill Kind = 2 // junk: a hole was filled
	KindTrim Kind = 3
)

func (k Kind) String() string {
	switch k {
	case KindData:
		return "data"
	case KindFill:
		return "filled"
	case KindTrim:
		return "trimmed"
	}
	return "unknown"
}

// Entry is one position of a log.
type Entry struct {
	Pos  uint64
	Kind Kind
	Data []byte
}

// Config configures a client.
type Config struct {
	// Endpoints are RPC addresses of Terrace nodes to start from; the
	// client learns the others.
	Endpoints []string
	// NodeID and Secret authenticate the client like a peer node (the
	// log's storage trusts its clients: they hold the cluster secret).
	NodeID string
	Secret []byte
	// TLS is the mutual-TLS client configuration of a TLS cluster (nil:
	// plain text).
	TLS    *tls.Config
	Logger *slog.Logger
	// RetryTimeout bounds how long one operation retries through failures
	// and recovery (default 30 s).
	RetryTimeout time.Duration
	// MaxInFlight is how many RPCs of one kind may be outstanding to one
	// node before further operations queue for the next batch (default 2:
	// under load, operations queued behind an RPC go out together).
	MaxInFlight int
}

// Client talks to a Terrace cluster's shared logs.
type Client struct {
	cfg  Config
	log  *slog.Logger
	pool *Pool
	id   [8]byte
	seq  atomic.Uint64

	mu        sync.Mutex
	endpoints []string
	next      int
	logs      map[string]*Log
}

// New returns a client. It does not contact the cluster until used.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoints", ErrInvalid)
	}
	if cfg.NodeID == "" {
		cfg.NodeID = "log-client"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryTimeout == 0 {
		cfg.RetryTimeout = 30 * time.Second
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 2
	}
	c := &Client{cfg: cfg, log: cfg.Logger, pool: NewPool(cfg.NodeID, cfg.Secret, cfg.TLS), logs: map[string]*Log{},
		endpoints: append([]string(nil), cfg.Endpoints...)}
	if _, err := rand.Read(c.id[:]); err != nil {
		return nil, err
	}
	return c, nil
}

// Close returns every open log's lease and closes connections.
func (c *Client) Close() {
	c.mu.Lock()
	logs := c.logs
	c.logs = map[string]*Log{}
	c.mu.Unlock()
	for _, l := range logs {
		l.Close()
	}
	c.pool.Close()
}

// newToken returns a token unique to this client and attempt.
func (c *Client) newToken() []byte {
	t := make([]byte, 16)
	copy(t, c.id[:])
	binary.BigEndian.PutUint64(t[8:], c.seq.Add(1))
	return t
}

// learn adds node addresses to the endpoints used for metadata calls.
func (c *Client) learn(addrs map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
next:
	for _, a := range addrs {
		for _, e := range c.endpoints {
			if e == a {
				continue next
			}
		}
		c.endpoints = append(c.endpoints, a)
	}
}

// transient reports whether err means "could not reach the node".
func transient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && (st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded)
}

// mapErr turns a metadata call's gRPC error into the package's errors.
func mapErr(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrNoSuchLog, st.Message())
	case codes.AlreadyExists:
		return fmt.Errorf("%w: %s", ErrExists, st.Message())
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrInvalid, st.Message())
	}
	return err
}

// anyNode runs f against the nodes in turn until one answers (a node that
// cannot be reached is skipped), starting after the last that worked.
func (c *Client) anyNode(ctx context.Context, avoid string, f func(zlogpb.LogClient) error) error {
	var last error
	// A few rounds: a node that just restarted, or a burst of load, should
	// not fail a metadata call that any node could answer a moment later.
	for round := 0; round < 3; round++ {
		if round > 0 {
			if sleepCtx(ctx, time.Duration(round)*100*time.Millisecond) != nil {
				break
			}
		}
		c.mu.Lock()
		eps := append([]string(nil), c.endpoints...)
		start := c.next
		c.mu.Unlock()
		for i := range eps {
			k := (start + i) % len(eps)
			addr := eps[k]
			if addr == avoid && len(eps) > 1 {
				continue
			}
			cl, err := c.pool.Get(addr)
			if err == nil {
				err = f(cl)
			}
			if transient(err) {
				c.pool.Reset(addr)
				last = err
				if ctx.Err() != nil {
					return ctx.Err()
				}
				continue
			}
			if err == nil {
				c.mu.Lock()
				c.next = k
				c.mu.Unlock()
			}
			return mapErr(err)
		}
	}
	return fmt.Errorf("%w: no node answered: %v", ErrUnavailable, last)
}

// CreateOptions describe a new log.
type CreateOptions struct {
	// Vector is the replication vector (default "any=2").
	Vector string
	// Stripes is the log's width (default 8).
	Stripes int
	// Lease policy: the most positions one lease may hold and for how
	// long (0: leases off).
	MaxLeasePositions int
	MaxLeaseHold      time.Duration
}

// Create creates a log.
func (c *Client) Create(ctx context.Context, name string, o CreateOptions) (*zlogpb.LogInfo, error) {
	var info *zlogpb.LogInfo
	err := c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		var err error
		info, err = cl.CreateLog(ctx, &zlogpb.CreateLogRequest{Name: name, Vector: o.Vector, Stripes: uint32(o.Stripes),
			MaxLeasePositions: uint32(o.MaxLeasePositions), MaxLeaseHoldMs: o.MaxLeaseHold.Milliseconds()})
		return err
	})
	return info, err
}

// Delete deletes a log: its metadata goes at once, its replicas' space is
// reclaimed by each node's garbage collection.
func (c *Client) Delete(ctx context.Context, name string) error {
	return c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		_, err := cl.DeleteLog(ctx, &zlogpb.NameRequest{Name: name})
		return err
	})
}

// List lists every log.
func (c *Client) List(ctx context.Context) ([]*zlogpb.LogInfo, error) {
	var out []*zlogpb.LogInfo
	err := c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		r, err := cl.ListLogs(ctx, &zlogpb.Empty{})
		if err == nil {
			out = r.Logs
		}
		return err
	})
	return out, err
}

// Info returns a log's record, layout and host, and its tail when the
// sequencer answers.
func (c *Client) Info(ctx context.Context, name string) (*zlogpb.LogInfo, error) {
	var info *zlogpb.LogInfo
	err := c.anyNode(ctx, "", func(cl zlogpb.LogClient) error {
		var err error
		info, err = cl.GetLog(ctx, &zlogpb.GetLogRequest{Name: name})
		return err
	})
	if err != nil {
		return nil, err
	}
	l := c.Open(name, LogOptions{})
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if t, err := l.tailOnce(tctx); err == nil {
		info.Tail = t
	}
	return info, nil
}

// LogOptions are a log handle's client-side settings.
type LogOptions struct {
	// LeasePositions > 1 turns on leased batching: Append takes positions
	// from a block leased from the sequencer for up to LeaseHold instead
	// of asking for each (bounded by the log's policy). LeasePositions is
	// the largest lease; the client sizes each lease to what it used in
	// the previous one. Unused positions are filled when the lease ends.
	LeasePositions int
	LeaseHold      time.Duration
	// HoleTimeout is how long Subscribe waits for a position below the
	// tail to be written before filling it (default: the log's lease hold
	// plus 2 s).
	HoleTimeout time.Duration
}

// Open returns a handle on a log (the same handle for the same name, the
// first options winning). It contacts the cluster on first use.
func (c *Client) Open(name string, o LogOptions) *Log {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.logs[name]; ok {
		return l
	}
	l := &Log{c: c, name: name, opts: o}
	l.seqB = newSeqBatcher(l)
	c.logs[name] = l
	return l
}

// state is a log handle's cached view.
type state struct {
	rec   layout.Record
	lay   layout.Layout
	host  string
	addrs map[string]string
}

func (st *state) addr(node string) (string, bool) {
	a, ok := st.addrs[node]
	return a, ok && a != ""
}
