package client

import (
	"context"
	"crypto/tls"
	"sync"

	"google.golang.org/grpc"

	"github.com/terrace-storage/terrace/internal/cluster"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// Pool keeps one authenticated gRPC connection per node address and one
// batcher per address and kind of call, so concurrent operations to the
// same node share RPCs.
type Pool struct {
	self   string
	secret []byte
	tls    *tls.Config

	mu       sync.Mutex
	conns    map[string]*grpc.ClientConn
	batchers map[batchKey]*Batcher
	closed   bool
}

type batchKey struct {
	addr string
	kind string
}

// NewPool returns a pool that authenticates as self with secret and, in
// a TLS cluster, dials with tc (mutual TLS with the cluster CA).
func NewPool(self string, secret []byte, tc *tls.Config) *Pool {
	return &Pool{self: self, secret: secret, tls: tc, conns: map[string]*grpc.ClientConn{}, batchers: map[batchKey]*Batcher{}}
}

// Get returns a client for the node at addr.
func (p *Pool) Get(addr string) (zlogpb.LogClient, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	cc, ok := p.conns[addr]
	if !ok {
		var err error
		cc, err = cluster.DialPeer(addr, p.self, p.secret, p.tls)
		if err != nil {
			return nil, err
		}
		p.conns[addr] = cc
	}
	return zlogpb.NewLogClient(cc), nil
}

// Batcher returns the batcher of kind ("write", "replicate", "read") for
// addr, creating it with call.
func (p *Pool) Batcher(addr, kind string, maxInFlight int, call func(ctx context.Context, c zlogpb.LogClient, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error)) *Batcher {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := batchKey{addr, kind}
	b := p.batchers[k]
	if b == nil {
		b = newBatcher(maxInFlight, func(ctx context.Context, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
			c, err := p.Get(addr)
			if err != nil {
				return nil, err
			}
			res, err := call(ctx, c, ops)
			if transient(err) {
				p.Reset(addr)
			}
			return res, err
		})
		p.batchers[k] = b
	}
	return b
}

// Reset makes the connection to addr dial again at once on its next use.
// gRPC backs off reconnecting to an address that failed (up to minutes),
// and fails calls fast meanwhile with the old error: after a node
// restarts, its peers would keep seeing it as down. Callers reset after a
// transport error, so the next attempt finds out afresh.
func (p *Pool) Reset(addr string) {
	p.mu.Lock()
	cc := p.conns[addr]
	p.mu.Unlock()
	if cc != nil {
		cc.ResetConnectBackoff()
	}
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for k, cc := range p.conns {
		cc.Close()
		delete(p.conns, k)
	}
}
