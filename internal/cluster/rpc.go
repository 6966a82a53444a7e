package cluster

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/cluster/rpcpb"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/replica"
)

// Authentication: every call carries the caller's node ID, a timestamp and
// HMAC-SHA256(secret, method|node|timestamp). The secret never crosses the
// wire. The MAC does not cover the request, so a token seen on the wire
// authorizes any call of its method, with any arguments and any number of
// times, until it is authWindow old: without TLS the cluster trusts its
// network (docs/security.md).
const (
	mdNode     = "x-terrace-node"
	mdTime     = "x-terrace-time"
	mdMAC      = "x-terrace-mac"
	authWindow = 5 * time.Minute
)

// ErrUnauthenticated is returned to peers without a valid cluster MAC.
var ErrUnauthenticated = errors.New("cluster: peer not authenticated (wrong or missing cluster secret)")

func mac(secret []byte, method, node, ts string) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(method + "|" + node + "|" + ts))
	return hex.EncodeToString(h.Sum(nil))
}

// AuthInterceptor refuses calls without a valid MAC.
func AuthInterceptor(secret []byte) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		get := func(k string) string {
			if v := md.Get(k); len(v) > 0 {
				return v[0]
			}
			return ""
		}
		node, ts, got := get(mdNode), get(mdTime), get(mdMAC)
		nanos, err := strconv.ParseInt(ts, 10, 64)
		if err != nil || got == "" {
			return nil, status.Error(codes.Unauthenticated, ErrUnauthenticated.Error())
		}
		if d := time.Since(time.Unix(0, nanos)); d > authWindow || d < -authWindow {
			return nil, status.Error(codes.Unauthenticated, "cluster: peer clock skew beyond 5m or replayed token")
		}
		if !hmac.Equal([]byte(got), []byte(mac(secret, info.FullMethod, node, ts))) {
			return nil, status.Error(codes.Unauthenticated, ErrUnauthenticated.Error())
		}
		return handler(ctx, req)
	}
}

func clientAuth(secret []byte, self string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ts := strconv.FormatInt(time.Now().UnixNano(), 10)
		ctx = metadata.AppendToOutgoingContext(ctx, mdNode, self, mdTime, ts, mdMAC, mac(secret, method, self, ts))
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// toStatus maps storage errors to gRPC codes so the caller can map back.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	code := codes.Internal
	switch {
	case errors.Is(err, replica.ErrCorrupt):
		code = codes.DataLoss
	case errors.Is(err, replica.ErrFull):
		code = codes.ResourceExhausted
	case errors.Is(err, replica.ErrNotExist):
		code = codes.NotFound
	case errors.Is(err, replica.ErrFailed):
		code = codes.Unavailable
	case errors.Is(err, replica.ErrAppendOnly):
		code = codes.FailedPrecondition
	}
	return status.Error(code, err.Error())
}

// fromStatus maps a gRPC error back to the storage sentinel errors.
func fromStatus(node model.NodeID, err error) error {
	if err == nil {
		return nil
	}
	st, _ := status.FromError(err)
	var base error
	switch st.Code() {
	case codes.DataLoss:
		base = replica.ErrCorrupt
	case codes.ResourceExhausted:
		base = replica.ErrFull
	case codes.NotFound:
		base = replica.ErrNotExist
	case codes.FailedPrecondition:
		base = replica.ErrAppendOnly
	case codes.Unauthenticated:
		base = ErrUnauthenticated
	default:
		base = ErrPeerUnavailable
	}
	return fmt.Errorf("node %s: %w: %s", node, base, st.Message())
}

// ErrPeerUnavailable means a peer could not be reached or failed.
var ErrPeerUnavailable = errors.New("cluster: peer unavailable")

// ReplicaServer serves this node's devices to peers.
type ReplicaServer struct {
	rpcpb.UnimplementedReplicaServer
	local *replica.Local
	// router reads a Pull's source when it lives on another node.
	router *Router
	// inflight counts data calls being served (the NrConn of read
	// ordering, published in heartbeats).
	inflight atomic.Int64
}

// InFlight returns the data calls being served now.
func (s *ReplicaServer) InFlight() int { return int(s.inflight.Load()) }

func (s *ReplicaServer) enter() func() {
	s.inflight.Add(1)
	return func() { s.inflight.Add(-1) }
}

// NewReplicaServer wraps the local devices; router serves Pull's reads
// from other nodes.
func NewReplicaServer(local *replica.Local, router *Router) *ReplicaServer {
	return &ReplicaServer{local: local, router: router}
}

// Pull copies a replica onto one of this node's devices from wherever the
// source lives: the bytes flow source node → this node, once.
func (s *ReplicaServer) Pull(ctx context.Context, r *rpcpb.PullRequest) (*rpcpb.Empty, error) {
	defer s.enter()()
	dst, id := rep(r.Dst)
	if !s.local.Has(dst.Device) {
		return nil, status.Errorf(codes.InvalidArgument, "cluster: pull to %s: not a device of this node", dst.Device)
	}
	src, _ := rep(r.Src)
	src.Node = model.NodeID(r.SrcNode)
	dst.Node = s.local.Node
	return empty, toStatus(s.local.PullFrom(ctx, s.router, dst, src, id, r.Size))
}

func rep(ref *rpcpb.ReplicaRef) (model.Replica, uint64) {
	return model.Replica{Device: model.DeviceID(ref.GetDevice())}, ref.GetEgroup()
}

var empty = &rpcpb.Empty{}

func (s *ReplicaServer) Create(ctx context.Context, r *rpcpb.CreateRequest) (*rpcpb.Empty, error) {
	rp, id := rep(r.Ref)
	return empty, toStatus(s.local.Create(ctx, rp, id))
}

func (s *ReplicaServer) Append(ctx context.Context, r *rpcpb.AppendRequest) (*rpcpb.Empty, error) {
	defer s.enter()()
	rp, id := rep(r.Ref)
	if r.Sync {
		return empty, toStatus(s.local.AppendSync(ctx, rp, id, r.Offset, r.Encoded))
	}
	return empty, toStatus(s.local.Append(ctx, rp, id, r.Offset, r.Encoded))
}

func (s *ReplicaServer) Sync(ctx context.Context, r *rpcpb.SyncRequest) (*rpcpb.Empty, error) {
	rp, id := rep(r.Ref)
	return empty, toStatus(s.local.Sync(ctx, rp, id))
}

func (s *ReplicaServer) Truncate(ctx context.Context, r *rpcpb.TruncateRequest) (*rpcpb.Empty, error) {
	rp, id := rep(r.Ref)
	return empty, toStatus(s.local.Truncate(ctx, rp, id, r.Size))
}

func (s *ReplicaServer) Read(ctx context.Context, r *rpcpb.ReadRequest) (*rpcpb.DataResponse, error) {
	defer s.enter()()
	rp, id := rep(r.Ref)
	b, err := s.local.Read(ctx, rp, id, r.ExtentOffset, r.ExtentLength, r.From, r.To)
	return &rpcpb.DataResponse{Data: b}, toStatus(err)
}

func (s *ReplicaServer) ReadRaw(ctx context.Context, r *rpcpb.ReadRawRequest) (*rpcpb.DataResponse, error) {
	defer s.enter()()
	if r.Length < 0 || r.Length > maxMessageBytes-1024 {
		return nil, status.Errorf(codes.InvalidArgument, "cluster: raw read of %d bytes exceeds %d", r.Length, maxMessageBytes)
	}
	rp, id := rep(r.Ref)
	b, err := s.local.ReadRaw(ctx, rp, id, r.Offset, r.Length)
	return &rpcpb.DataResponse{Data: b}, toStatus(err)
}

func (s *ReplicaServer) Verify(ctx context.Context, r *rpcpb.VerifyRequest) (*rpcpb.Empty, error) {
	rp, id := rep(r.Ref)
	return empty, toStatus(s.local.Verify(ctx, rp, id, r.Size))
}

func (s *ReplicaServer) Remove(ctx context.Context, r *rpcpb.RemoveRequest) (*rpcpb.Empty, error) {
	rp, id := rep(r.Ref)
	return empty, toStatus(s.local.Remove(ctx, rp, id))
}

// maxMessageBytes bounds one RPC: an extent (≤ 64 MiB by object options,
// 4 MiB by default) plus slice headers, with headroom.
const maxMessageBytes = 80 << 20

// NewGRPCServer returns a gRPC server with authentication and size limits.
// With tc (from tlsconf.Files.PeerServer) it speaks mutual TLS only.
func NewGRPCServer(secret []byte, tc *tls.Config) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.UnaryInterceptor(AuthInterceptor(secret)),
		grpc.MaxRecvMsgSize(maxMessageBytes),
		grpc.MaxSendMsgSize(maxMessageBytes),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	return grpc.NewServer(opts...)
}

// transportCredentials is mutual TLS with tc (tlsconf.Files.PeerClient),
// or plain text when tc is nil (a cluster without TLS; every call is still
// HMAC-authenticated).
func transportCredentials(tc *tls.Config) grpc.DialOption {
	if tc == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(tc))
}

// Router is the cluster's ReplicaIO: operations on this node's devices go
// straight to disk; others go over gRPC to the owning node.
type Router struct {
	self    model.NodeID
	local   *replica.Local
	members *Membership
	secret  []byte
	tls     *tls.Config
	// CallTimeout bounds one replica RPC so that a hung peer fails the
	// write over to a fresh egroup instead of stalling it.
	CallTimeout time.Duration

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
	// override maps a node to the address dialled instead of the one it
	// registered (a test hook for the chaos suite's per-link proxies).
	override map[model.NodeID]string
}

// OverrideAddresses makes the router dial addr for node instead of the
// RPC address the node registered. It is a test hook (the chaos suite
// routes each link through its own fault-injecting proxy); call it before
// the first RPC.
func (rt *Router) OverrideAddresses(over map[model.NodeID]string) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.override = over
}

var _ replica.IO = (*Router)(nil)

// NewRouter returns the router. tc, when set, is the mutual-TLS client
// configuration for peers (tlsconf.Files.PeerClient).
func NewRouter(self model.NodeID, local *replica.Local, members *Membership, secret []byte, tc *tls.Config) *Router {
	return &Router{self: self, local: local, members: members, secret: secret, tls: tc, CallTimeout: 30 * time.Second, conns: map[string]*grpc.ClientConn{}}
}

// nodeOf resolves a device's node: the replica's Node when set, else the
// "<node>/<dev>" naming convention.
func nodeOf(r model.Replica) model.NodeID {
	if r.Node != "" {
		return r.Node
	}
	for i := 0; i < len(r.Device); i++ {
		if r.Device[i] == '/' {
			return model.NodeID(r.Device[:i])
		}
	}
	return ""
}

func (rt *Router) client(node model.NodeID) (rpcpb.ReplicaClient, error) {
	ni, ok := rt.members.Node(node)
	if !ok || ni.RPCAddress == "" {
		return nil, fmt.Errorf("node %s: %w: not registered", node, ErrPeerUnavailable)
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	addr := ni.RPCAddress
	if a, ok := rt.override[node]; ok {
		addr = a
	}
	cc, ok := rt.conns[addr]
	if !ok {
		var err error
		cc, err = grpc.NewClient(addr,
			transportCredentials(rt.tls),
			grpc.WithUnaryInterceptor(clientAuth(rt.secret, string(rt.self))),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessageBytes), grpc.MaxCallSendMsgSize(maxMessageBytes)),
		)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w: %v", node, ErrPeerUnavailable, err)
		}
		rt.conns[addr] = cc
	}
	return rpcpb.NewReplicaClient(cc), nil
}

// Close closes peer connections.
func (rt *Router) Close() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for k, cc := range rt.conns {
		cc.Close()
		delete(rt.conns, k)
	}
}

func (rt *Router) remote(ctx context.Context, r model.Replica, call func(context.Context, rpcpb.ReplicaClient) error) error {
	node := nodeOf(r)
	c, err := rt.client(node)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, rt.CallTimeout)
	defer cancel()
	return fromStatus(node, call(ctx, c))
}

func ref(r model.Replica, id uint64) *rpcpb.ReplicaRef {
	return &rpcpb.ReplicaRef{Device: string(r.Device), Egroup: id}
}

func (rt *Router) isLocal(r model.Replica) bool { return nodeOf(r) == rt.self }

func (rt *Router) Create(ctx context.Context, r model.Replica, id uint64) error {
	if rt.isLocal(r) {
		return rt.local.Create(ctx, r, id)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Create(ctx, &rpcpb.CreateRequest{Ref: ref(r, id)})
		return err
	})
}

func (rt *Router) Append(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	if rt.isLocal(r) {
		return rt.local.Append(ctx, r, id, off, enc)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Append(ctx, &rpcpb.AppendRequest{Ref: ref(r, id), Offset: off, Encoded: enc})
		return err
	})
}

func (rt *Router) AppendSync(ctx context.Context, r model.Replica, id uint64, off int64, enc []byte) error {
	if rt.isLocal(r) {
		return rt.local.AppendSync(ctx, r, id, off, enc)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Append(ctx, &rpcpb.AppendRequest{Ref: ref(r, id), Offset: off, Encoded: enc, Sync: true})
		return err
	})
}

func (rt *Router) Sync(ctx context.Context, r model.Replica, id uint64) error {
	if rt.isLocal(r) {
		return rt.local.Sync(ctx, r, id)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Sync(ctx, &rpcpb.SyncRequest{Ref: ref(r, id)})
		return err
	})
}

func (rt *Router) Truncate(ctx context.Context, r model.Replica, id uint64, size int64) error {
	if rt.isLocal(r) {
		return rt.local.Truncate(ctx, r, id, size)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Truncate(ctx, &rpcpb.TruncateRequest{Ref: ref(r, id), Size: size})
		return err
	})
}

func (rt *Router) Read(ctx context.Context, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	if rt.isLocal(r) {
		return rt.local.Read(ctx, r, id, extOff, extLen, from, to)
	}
	var out []byte
	err := rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		resp, err := c.Read(ctx, &rpcpb.ReadRequest{Ref: ref(r, id), ExtentOffset: extOff, ExtentLength: extLen, From: from, To: to})
		if err == nil {
			out = resp.Data
		}
		return err
	})
	return out, err
}

// ReadInto is Read into buf's storage for a local replica (a streaming
// GET recycles one chunk buffer instead of allocating and zeroing a
// megabyte per chunk); a remote replica's bytes arrive in the RPC's own
// buffer and are returned as they are.
func (rt *Router) ReadInto(ctx context.Context, buf []byte, r model.Replica, id uint64, extOff, extLen, from, to int64) ([]byte, error) {
	if rt.isLocal(r) {
		return rt.local.ReadInto(ctx, buf, r, id, extOff, extLen, from, to)
	}
	return rt.Read(ctx, r, id, extOff, extLen, from, to)
}

var _ replica.BufferedReader = (*Router)(nil)

func (rt *Router) ReadRaw(ctx context.Context, r model.Replica, id uint64, off, n int64) ([]byte, error) {
	if rt.isLocal(r) {
		return rt.local.ReadRaw(ctx, r, id, off, n)
	}
	var out []byte
	err := rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		resp, err := c.ReadRaw(ctx, &rpcpb.ReadRawRequest{Ref: ref(r, id), Offset: off, Length: n})
		if err == nil {
			out = resp.Data
		}
		return err
	})
	return out, err
}

func (rt *Router) Verify(ctx context.Context, r model.Replica, id uint64, size int64) error {
	if rt.isLocal(r) {
		return rt.local.Verify(ctx, r, id, size)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Verify(ctx, &rpcpb.VerifyRequest{Ref: ref(r, id), Size: size})
		return err
	})
}

func (rt *Router) Remove(ctx context.Context, r model.Replica, id uint64) error {
	if rt.isLocal(r) {
		return rt.local.Remove(ctx, r, id)
	}
	return rt.remote(ctx, r, func(ctx context.Context, c rpcpb.ReplicaClient) error {
		_, err := c.Remove(ctx, &rpcpb.RemoveRequest{Ref: ref(r, id)})
		return err
	})
}

// Pull makes dst a verified copy of src, on dst's node: a local copy when
// dst is here (reading src locally or from its node), else a Pull RPC to
// dst's node, which reads the source itself.
func (rt *Router) Pull(ctx context.Context, dst, src model.Replica, id uint64, size int64) error {
	if rt.isLocal(dst) {
		return rt.local.PullFrom(ctx, rt, dst, src, id, size)
	}
	node := nodeOf(dst)
	c, err := rt.client(node)
	if err != nil {
		return err
	}
	// A pull streams a whole egroup: allow for a slow (throttled) copy.
	timeout := rt.CallTimeout + time.Duration(size/(512<<10))*time.Second
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err = c.Pull(ctx, &rpcpb.PullRequest{Dst: ref(dst, id), Src: ref(src, id), SrcNode: string(nodeOf(src)), Size: size})
	return fromStatus(node, err)
}
