package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/raft/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
)

// EtcdKV implements meta.KV on etcd v3. Compare-and-swap maps to etcd's
// ModRevision compare (CreateRevision == 0 for "must not exist"), so the
// typed maps and every caller behave exactly as on Pebble.
//
// Group commit: concurrent Commits are merged into one etcd transaction
// whose parts are nested transactions, each with its own compares (etcd
// reports each part's outcome), so N small object commits cost one gRPC
// call, one raft proposal and one apply instead of N. Parts are merged
// only when they are independent: no part writes a key another part
// writes or compares, so every part's compares mean what they would alone.
// A merged transaction that etcd refuses as a whole (too many ops, too
// large) is retried part by part.
type EtcdKV struct {
	c *clientv3.Client
	// local, when set, is an in-process client of this node's own etcd
	// member: reads go straight into the member (no gRPC, no socket) and
	// fall back to c when it fails. Writes go through it too when
	// leaderKnown is set (see WriteLocally): the member proposes to raft
	// itself (a follower forwards the proposal to the leader over its
	// existing raft stream), so a commit costs no gRPC call to another
	// process.
	local       *clientv3.Client
	leaderKnown func() bool

	queue    chan *pendingCommit // nil: no group commit
	maxOps   atomic.Int64
	maxBytes int
	stop     chan struct{}
	wg       sync.WaitGroup

	// Counters for benchmarks and metrics: commits requested and etcd
	// transactions sent.
	commits, txns atomic.Int64
	// reads counts Get and Scan requests; localFallbacks the reads the
	// local member failed and the network client answered;
	// localWriteFallbacks the transactions the local member could not
	// take (no leader known, or refused before proposing them), which the
	// network client then sent.
	reads, localFallbacks, localWriteFallbacks atomic.Int64
}

var _ meta.KV = (*EtcdKV)(nil)

// EtcdOptions tune an EtcdKV.
type EtcdOptions struct {
	// GroupCommit merges concurrent commits (default on through
	// NewEtcdKV).
	GroupCommit bool
	// Committers is how many merged transactions may be in flight at
	// once (default 4).
	Committers int
	// MaxBatchOps bounds the operations (and, separately, the compares)
	// of one merged transaction; etcd's --max-txn-ops must allow it
	// (embedded members are started with room for it). Default 1024.
	MaxBatchOps int
}

// NewEtcdKV wraps a client, with group commit.
func NewEtcdKV(c *clientv3.Client) *EtcdKV {
	return NewEtcdKVWith(c, EtcdOptions{GroupCommit: true})
}

// NewEtcdKVWith wraps a client with explicit options.
func NewEtcdKVWith(c *clientv3.Client, o EtcdOptions) *EtcdKV {
	e := &EtcdKV{c: c, stop: make(chan struct{})}
	if !o.GroupCommit {
		return e
	}
	if o.Committers == 0 {
		o.Committers = 4
	}
	if o.MaxBatchOps == 0 {
		o.MaxBatchOps = 1024
	}
	e.maxOps.Store(int64(o.MaxBatchOps))
	e.maxBytes = 1 << 20 // under etcd's default 1.5 MiB request limit
	e.queue = make(chan *pendingCommit, 4096)
	for range o.Committers {
		e.wg.Add(1)
		go e.committer()
	}
	return e
}

// ReadLocally sends reads to local, an in-process client of this node's
// own etcd member (v3client), falling back to the network client when it
// fails. A linearizable read through the local member is still
// linearizable: the member confirms the leader's commit index first.
func (e *EtcdKV) ReadLocally(local *clientv3.Client) { e.local = local }

// WriteLocally also sends transactions through the local member set by
// ReadLocally while leaderKnown reports that the member knows a raft
// leader (nil turns local writes off). Without a leader the member would
// hold the proposal until its request timeout and then answer with a
// timeout that cannot be told from one after the proposal entered the
// log; so such a transaction goes to the network client from the start,
// which may reach a member that has a leader. Of the errors the member
// returns, only those raised before proposing (no leader, too many
// requests pending, proposal dropped) send the transaction on to the
// network client; any other is returned as it is, because the
// transaction may still be applied and sending it again could apply it
// twice.
func (e *EtcdKV) WriteLocally(leaderKnown func() bool) { e.leaderKnown = leaderKnown }

// commitTxn sends one etcd transaction, through the local member when
// writes go there.
func (e *EtcdKV) commitTxn(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (*clientv3.TxnResponse, error) {
	e.txns.Add(1)
	if e.local != nil && e.leaderKnown != nil {
		if !e.leaderKnown() {
			e.localWriteFallbacks.Add(1)
			return e.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
		}
		resp, err := e.local.Txn(ctx).If(cmps...).Then(ops...).Commit()
		if err == nil || ctx.Err() != nil || !refusedBeforeProposal(err) {
			return resp, err
		}
		e.localWriteFallbacks.Add(1)
	}
	return e.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
}

// refusedBeforeProposal reports whether err says etcd refused a request
// before it entered the raft log, so that sending it again elsewhere
// cannot apply it twice.
func refusedBeforeProposal(err error) bool {
	if errors.Is(err, rpctypes.ErrNoLeader) || errors.Is(err, rpctypes.ErrTooManyRequests) ||
		errors.Is(err, raft.ErrProposalDropped) {
		return true
	}
	// The in-process client hands raft's error over as a status message.
	return strings.Contains(err.Error(), raft.ErrProposalDropped.Error())
}

// refusedWhole reports whether err says a transaction was refused before
// any of it was applied: too many operations, too large a request (etcd's
// limit, or the client's own before sending), or refused before its
// proposal (refusedBeforeProposal).
func refusedWhole(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) ||
		status.Code(err) == codes.ResourceExhausted || refusedBeforeProposal(err)
}

// get runs a read on the local member when there is one, else (or when it
// fails, e.g. during a leader change, which the in-process client does not
// retry) on the network client.
func (e *EtcdKV) get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	e.reads.Add(1)
	if e.local != nil {
		resp, err := e.local.Get(ctx, key, opts...)
		if err == nil || ctx.Err() != nil {
			return resp, err
		}
		e.localFallbacks.Add(1)
	}
	return e.c.Get(ctx, key, opts...)
}

// Stats returns the commits requested and the etcd transactions sent.
func (e *EtcdKV) Stats() (commits, txns int64) { return e.commits.Load(), e.txns.Load() }

// KVStats implements meta.StatsReporter.
func (e *EtcdKV) KVStats() meta.KVStats {
	return meta.KVStats{Reads: e.reads.Load(), Commits: e.commits.Load(), BackendTxns: e.txns.Load(),
		LocalReadFallbacks: e.localFallbacks.Load(), LocalWriteFallbacks: e.localWriteFallbacks.Load()}
}

var _ meta.StatsReporter = (*EtcdKV)(nil)

// Client returns the etcd client (membership uses leases directly).
func (e *EtcdKV) Client() *clientv3.Client { return e.c }

// Get implements meta.KV.
func (e *EtcdKV) Get(ctx context.Context, key []byte) (meta.Item, error) {
	resp, err := e.get(ctx, string(key))
	if err != nil {
		return meta.Item{}, fmt.Errorf("meta: etcd get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return meta.Item{}, meta.ErrNotFound
	}
	kv := resp.Kvs[0]
	return meta.Item{Key: kv.Key, Value: kv.Value, ModRev: kv.ModRevision}, nil
}

// GetStale implements meta.StaleReader with a serializable read: answered
// by the local member without a quorum round.
func (e *EtcdKV) GetStale(ctx context.Context, key []byte) (meta.Item, error) {
	resp, err := e.get(ctx, string(key), clientv3.WithSerializable())
	if err != nil {
		return meta.Item{}, fmt.Errorf("meta: etcd get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return meta.Item{}, meta.ErrNotFound
	}
	kv := resp.Kvs[0]
	return meta.Item{Key: kv.Key, Value: kv.Value, ModRev: kv.ModRevision}, nil
}

var _ meta.StaleReader = (*EtcdKV)(nil)

// Scan implements meta.KV.
func (e *EtcdKV) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	return e.scan(ctx, start, end, limit)
}

func (e *EtcdKV) scan(ctx context.Context, start, end []byte, limit int, extra ...clientv3.OpOption) ([]meta.Item, error) {
	opts := append([]clientv3.OpOption{clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}, extra...)
	if end == nil {
		opts = append(opts, clientv3.WithFromKey())
	} else {
		opts = append(opts, clientv3.WithRange(string(end)))
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := e.get(ctx, string(start), opts...)
	if err != nil {
		return nil, fmt.Errorf("meta: etcd scan: %w", err)
	}
	out := make([]meta.Item, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, meta.Item{Key: kv.Key, Value: kv.Value, ModRev: kv.ModRevision})
	}
	return out, nil
}

var _ meta.Snapshotter = (*EtcdKV)(nil)

// Snapshot implements meta.Snapshotter: the revision a linearizable read
// returns now, read with WithRev. etcd keeps every revision until it is
// compacted (auto-compaction keeps an hour), so a snapshot outliving that
// fails its reads with etcd's "required revision has been compacted".
func (e *EtcdKV) Snapshot(ctx context.Context) (meta.Snapshot, error) {
	resp, err := e.get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("meta: etcd snapshot: %w", err)
	}
	return etcdSnapshot{e: e, rev: resp.Header.Revision}, nil
}

// SnapshotAt implements meta.Snapshotter: any member reads the state of a
// revision the cluster has reached.
func (e *EtcdKV) SnapshotAt(ctx context.Context, rev int64) (meta.Snapshot, error) {
	if rev <= 0 {
		return nil, fmt.Errorf("meta: etcd snapshot at revision %d", rev)
	}
	return etcdSnapshot{e: e, rev: rev}, nil
}

type etcdSnapshot struct {
	e   *EtcdKV
	rev int64
}

func (s etcdSnapshot) Rev() int64   { return s.rev }
func (s etcdSnapshot) Close() error { return nil }

// Scan implements meta.Snapshot.
func (s etcdSnapshot) Scan(ctx context.Context, start, end []byte, limit int) ([]meta.Item, error) {
	return s.e.scan(ctx, start, end, limit, clientv3.WithRev(s.rev))
}

// Commit implements meta.KV.
func (e *EtcdKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if err := checkTxn(t); err != nil {
		return 0, err
	}
	e.commits.Add(1)
	if e.queue == nil {
		return e.commitOne(ctx, t)
	}
	p := &pendingCommit{ctx: ctx, t: t, done: make(chan commitResult, 1)}
	select {
	case e.queue <- p:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-e.stop:
		return e.commitOne(ctx, t)
	}
	// Once queued, wait for the answer even if ctx ends: the commit may
	// already be in a merged transaction, and its outcome must be known.
	r := <-p.done
	return r.rev, r.err
}

func checkTxn(t *meta.Txn) error {
	if len(t.Ops) == 0 {
		return errors.New("meta: empty transaction")
	}
	if len(t.Ops)+len(t.Cmps) > meta.MaxTxnOps+16 {
		return fmt.Errorf("meta: transaction has %d ops, limit %d", len(t.Ops), meta.MaxTxnOps)
	}
	for _, op := range t.Ops {
		if len(op.Value) > meta.MaxValueBytes {
			return fmt.Errorf("meta: value for %q is %d bytes, limit %d", op.Key, len(op.Value), meta.MaxValueBytes)
		}
	}
	return nil
}

func etcdParts(t *meta.Txn) ([]clientv3.Cmp, []clientv3.Op) {
	cmps := make([]clientv3.Cmp, 0, len(t.Cmps))
	for _, c := range t.Cmps {
		if c.ModRev == 0 {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(string(c.Key)), "=", 0))
		} else {
			cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(c.Key)), "=", c.ModRev))
		}
	}
	ops := make([]clientv3.Op, 0, len(t.Ops))
	for _, op := range t.Ops {
		if op.Delete {
			ops = append(ops, clientv3.OpDelete(string(op.Key)))
		} else {
			ops = append(ops, clientv3.OpPut(string(op.Key), string(op.Value)))
		}
	}
	return cmps, ops
}

// commitOne sends one transaction on its own.
func (e *EtcdKV) commitOne(ctx context.Context, t *meta.Txn) (int64, error) {
	cmps, ops := etcdParts(t)
	resp, err := e.commitTxn(ctx, cmps, ops)
	if err != nil {
		return 0, fmt.Errorf("meta: etcd commit: %w", err)
	}
	if !resp.Succeeded {
		return 0, meta.ErrConflict
	}
	return resp.Header.Revision, nil
}

type commitResult struct {
	rev int64
	err error
}

type pendingCommit struct {
	ctx  context.Context
	t    *meta.Txn
	done chan commitResult
}

func (p *pendingCommit) size() int {
	n := 64
	for _, op := range p.t.Ops {
		n += len(op.Key) + len(op.Value) + 16
	}
	for _, c := range p.t.Cmps {
		n += len(c.Key) + 16
	}
	return n
}

// batch is a set of independent commits being merged.
type batch struct {
	parts         []*pendingCommit
	ops, cmps, sz int
	writes        map[string]bool
	compares      map[string]bool
}

// fits reports whether p can join without exceeding the limits or
// depending on another part (a key written by one part and written or
// compared by another).
func (b *batch) fits(p *pendingCommit, maxOps, maxBytes int) bool {
	if len(b.parts) > 0 && (b.ops+len(p.t.Ops) > maxOps || b.cmps+len(p.t.Cmps) > maxOps || b.sz+p.size() > maxBytes) {
		return false
	}
	for _, op := range p.t.Ops {
		if b.writes[string(op.Key)] || b.compares[string(op.Key)] {
			return false
		}
	}
	for _, c := range p.t.Cmps {
		if b.writes[string(c.Key)] {
			return false
		}
	}
	return true
}

func (b *batch) add(p *pendingCommit) {
	b.parts = append(b.parts, p)
	b.ops += len(p.t.Ops)
	b.cmps += len(p.t.Cmps)
	b.sz += p.size()
	for _, op := range p.t.Ops {
		b.writes[string(op.Key)] = true
	}
	for _, c := range p.t.Cmps {
		b.compares[string(c.Key)] = true
	}
}

// committer takes queued commits and sends them, merged while they are
// independent: whatever queued up while the previous transaction was in
// flight goes out together.
func (e *EtcdKV) committer() {
	defer e.wg.Done()
	var carry *pendingCommit
	for {
		first := carry
		carry = nil
		if first == nil {
			select {
			case first = <-e.queue:
			case <-e.stop:
				return
			}
		}
		b := &batch{writes: map[string]bool{}, compares: map[string]bool{}}
		b.add(first)
	drain:
		for {
			select {
			case p := <-e.queue:
				if !b.fits(p, int(e.maxOps.Load()), e.maxBytes) {
					carry = p
					break drain
				}
				b.add(p)
			default:
				break drain
			}
		}
		e.send(b.parts)
	}
}

// send commits parts as one transaction and answers each.
func (e *EtcdKV) send(parts []*pendingCommit) {
	live := parts[:0]
	for _, p := range parts {
		if err := p.ctx.Err(); err != nil {
			p.done <- commitResult{err: err} // never sent: safe to refuse
			continue
		}
		live = append(live, p)
	}
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		rev, err := e.commitOne(live[0].ctx, live[0].t)
		live[0].done <- commitResult{rev, err}
		return
	}
	subs := make([]clientv3.Op, len(live))
	for i, p := range live {
		cmps, ops := etcdParts(p.t)
		subs[i] = clientv3.OpTxn(cmps, ops, nil)
	}
	// The merged transaction outlives any one caller's context: it is
	// bounded by its own timeout instead.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := e.commitTxn(ctx, nil, subs)
	if errors.Is(err, rpctypes.ErrTooManyOps) {
		// An external etcd with a smaller --max-txn-ops: merge less.
		e.maxOps.Store(max(meta.MaxTxnOps, e.maxOps.Load()/2))
	}
	if err != nil && refusedWhole(err) {
		// Refused before anything was applied (too many ops, too large,
		// no leader): let each part try on its own.
		for _, p := range live {
			rev, err := e.commitOne(p.ctx, p.t)
			p.done <- commitResult{rev, err}
		}
		return
	}
	if err != nil {
		// The merged transaction may have been applied (a lost answer, a
		// timeout after the proposal): every part's outcome is unknown.
		// Sending a part again would find its own write and report a
		// conflict, which promises that nothing changed, and its writer
		// would then undo data that its committed record names.
		for _, p := range live {
			p.done <- commitResult{err: fmt.Errorf("meta: etcd commit (merged, outcome unknown): %w", err)}
		}
		return
	}
	for i, p := range live {
		sub := resp.Responses[i].GetResponseTxn()
		if sub == nil || !sub.Succeeded {
			p.done <- commitResult{err: meta.ErrConflict}
			continue
		}
		p.done <- commitResult{rev: resp.Header.Revision}
	}
}

// Watch implements meta.KV.
func (e *EtcdKV) Watch(ctx context.Context, prefix []byte) <-chan meta.Event {
	out := make(chan meta.Event, 1024)
	// The watch lives as long as its reader: when the goroutine below
	// gives up (an error, a reader that fell behind), cancel it, or the
	// client keeps buffering an abandoned watch's events for good.
	wctx, cancel := context.WithCancel(ctx)
	wc := e.c.Watch(wctx, string(prefix), clientv3.WithPrefix())
	go func() {
		defer close(out)
		defer cancel()
		for resp := range wc {
			if resp.Err() != nil {
				return
			}
			for _, ev := range resp.Events {
				me := meta.Event{Type: meta.EventPut, Item: meta.Item{Key: ev.Kv.Key, Value: ev.Kv.Value, ModRev: ev.Kv.ModRevision}}
				if ev.Type == clientv3.EventTypeDelete {
					me.Type = meta.EventDelete
				}
				select {
				case out <- me:
				default:
					return // receiver fell behind: close so it re-reads
				}
			}
		}
	}()
	return out
}

// Close implements meta.KV.
func (e *EtcdKV) Close() error {
	select {
	case <-e.stop:
	default:
		close(e.stop)
	}
	e.wg.Wait()
	// Commits queued after the committers stopped are answered here.
	for {
		select {
		case p := <-e.queue:
			rev, err := e.commitOne(p.ctx, p.t)
			p.done <- commitResult{rev, err}
			continue
		default:
		}
		break
	}
	return e.c.Close()
}
