package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/zlog/client"
	"github.com/terrace-storage/terrace/internal/zlog/layout"
	"github.com/terrace-storage/terrace/internal/zlog/store"
	"github.com/terrace-storage/terrace/internal/zlog/zlogpb"
)

// peers reaches other nodes' Log services, sharing RPCs among concurrent
// calls to the same node.
type peers struct {
	pool *client.Pool
}

func newPeers(self string, secret []byte, tc *tls.Config) *peers {
	return &peers{pool: client.NewPool(self, secret, tc)}
}

func (p *peers) close() { p.pool.Close() }

// maxOps bounds the operations of one storage request.
const maxOps = 4096

func keyOf(r *zlogpb.StripeRef) store.Key {
	return store.Key{Log: r.GetLog(), Segment: r.GetSegment(), Stripe: r.GetStripe()}
}

func tokenOf(b []byte) (store.Token, bool) {
	var t store.Token
	if len(b) != store.TokenBytes {
		return t, false
	}
	copy(t[:], b)
	return t, true
}

func result(r store.Result) *zlogpb.OpResult {
	out := &zlogpb.OpResult{Status: client.StatusToProto(r.Status), Kind: client.KindToProto(r.Kind), Data: r.Data}
	if r.Token != (store.Token{}) {
		out.Token = append([]byte(nil), r.Token[:]...)
	}
	if r.Err != nil {
		out.Message = r.Err.Error()
	}
	return out
}

func invalid(f string, a ...any) *zlogpb.OpResult {
	return &zlogpb.OpResult{Status: zlogpb.Status_STATUS_INVALID, Message: fmt.Sprintf(f, a...)}
}

// checkOp validates the fields every storage op needs.
func checkOp(op *zlogpb.Op, write bool) *zlogpb.OpResult {
	if op.GetRef() == nil || op.Device == "" {
		return invalid("log: op without stripe or device")
	}
	if !write {
		return nil
	}
	switch op.Kind {
	case zlogpb.Kind_KIND_DATA, zlogpb.Kind_KIND_FILL:
		if _, ok := tokenOf(op.Token); !ok {
			return invalid("log: token of %d bytes, want %d", len(op.Token), store.TokenBytes)
		}
	case zlogpb.Kind_KIND_TRIM:
	default:
		return invalid("log: op of kind %v", op.Kind)
	}
	if len(op.Data) > layout.MaxEntryBytes {
		return invalid("log: entry of %d bytes exceeds %d", len(op.Data), layout.MaxEntryBytes)
	}
	if op.Kind != zlogpb.Kind_KIND_DATA && len(op.Data) > 0 {
		return invalid("log: %v op with data", op.Kind)
	}
	if len(op.Backups) >= layout.MaxReplicas {
		return invalid("log: %d backups", len(op.Backups))
	}
	return nil
}

// job is one data or fill op at the primary that needs forwarding.
type job struct {
	i     int
	p     *store.Pending // nil: the entry exists already (re-forward it)
	fwd   *zlogpb.Op     // what the backups get
	taken *zlogpb.OpResult
}

// Write is the primary's write-once: it decides each op locally (Begin),
// then journals the new entries and forwards them to the backups in
// parallel, and answers OK only when every replica holds the entry. A fill
// that finds an entry its primary has not confirmed completes that entry
// instead (CORFU's read repair) and answers TAKEN with it.
func (s *Service) Write(ctx context.Context, req *zlogpb.WriteRequest) (*zlogpb.WriteResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if len(req.Ops) > maxOps {
		return nil, status.Errorf(codes.InvalidArgument, "log: %d ops in one request, limit %d", len(req.Ops), maxOps)
	}
	res := make([]*zlogpb.OpResult, len(req.Ops))
	var jobs []*job
	var wg sync.WaitGroup
	for i, op := range req.Ops {
		if r := checkOp(op, true); r != nil {
			res[i] = r
			continue
		}
		key := keyOf(op.Ref)
		if op.Kind == zlogpb.Kind_KIND_TRIM {
			wg.Add(1)
			go func() {
				defer wg.Done()
				res[i] = s.trimAt(ctx, key, op)
			}()
			continue
		}
		if s.behind(op) {
			res[i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_STALE_EPOCH}
			continue
		}
		tok, _ := tokenOf(op.Token)
		p, r := s.store.Begin(op.Device, key, op.Pos, op.Epoch, client.KindFromProto(op.Kind), tok, store.Normal)
		switch {
		case p != nil:
			jobs = append(jobs, &job{i: i, p: p, fwd: forwardOf(op, op.Kind, op.Token, op.Data)})
		case r.Status == store.OK && r.Existing && r.Confirmed:
			res[i] = result(store.Result{Status: store.OK})
		case r.Status == store.OK && r.Existing:
			// A retry of an entry not known to be everywhere: forward again.
			jobs = append(jobs, &job{i: i, fwd: forwardOf(op, op.Kind, op.Token, op.Data)})
		case r.Status == store.Taken && op.Kind == zlogpb.Kind_KIND_FILL:
			cur := s.store.ReadAny(op.Device, key, op.Pos)
			if cur.Status != store.OK {
				res[i] = result(cur)
				continue
			}
			taken := result(store.Result{Status: store.Taken, Kind: cur.Kind, Token: cur.Token, Data: cur.Data})
			if r.Confirmed || cur.Kind == store.KindTrim {
				res[i] = taken
				continue
			}
			jobs = append(jobs, &job{i: i, fwd: forwardOf(op, client.KindToProto(cur.Kind), cur.Token[:], cur.Data), taken: taken})
		default:
			res[i] = result(r)
		}
	}
	// Journal new entries and forward everything, in parallel.
	var ps []*store.Pending
	var data [][]byte
	for _, j := range jobs {
		if j.p != nil {
			ps = append(ps, j.p)
			data = append(data, req.Ops[j.i].Data)
		}
	}
	var localErrs []error
	wg.Add(1)
	go func() {
		defer wg.Done()
		localErrs = store.WriteAll(ps, data)
	}()
	fwds := make([]*zlogpb.Op, len(jobs))
	backups := make([][]*zlogpb.Replica, len(jobs))
	for k, j := range jobs {
		fwds[k], backups[k] = j.fwd, req.Ops[j.i].Backups
	}
	var fwdRes []*zlogpb.OpResult
	wg.Add(1)
	go func() {
		defer wg.Done()
		fwdRes = s.forwardAll(ctx, fwds, backups)
	}()
	wg.Wait()
	li := 0
	for k, j := range jobs {
		op := req.Ops[j.i]
		if j.p != nil {
			err := localErrs[li]
			li++
			if err != nil {
				res[j.i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_ERROR, Message: err.Error()}
				continue
			}
		}
		if f := fwdRes[k]; f.Status != zlogpb.Status_STATUS_OK {
			res[j.i] = f
			continue
		}
		s.store.Confirm(op.Device, keyOf(op.Ref), op.Pos)
		if j.taken != nil {
			res[j.i] = j.taken
			s.metrics.completed.Inc()
		} else {
			res[j.i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_OK}
		}
	}
	return &zlogpb.WriteResponse{Results: res}, nil
}

// forwardOf builds the op a backup gets.
func forwardOf(op *zlogpb.Op, kind zlogpb.Kind, tok, data []byte) *zlogpb.Op {
	return &zlogpb.Op{Ref: op.Ref, Pos: op.Pos, Kind: kind, Token: tok, Data: data, Epoch: op.Epoch}
}

// forward sends op to every backup and folds their answers: OK only if
// all hold it.
func (s *Service) forward(ctx context.Context, op *zlogpb.Op, backups []*zlogpb.Replica) *zlogpb.OpResult {
	return s.forwardAll(ctx, []*zlogpb.Op{op}, [][]*zlogpb.Replica{backups})[0]
}

// forwardAll sends each ops[k] to every replica in backups[k] and folds
// the answers per op: OK only if every backup holds it. The ops bound for
// one backup node travel together (one wait per node, usually one RPC),
// which is what keeps a primary's CPU per append low when many appends
// arrive in one Write.
func (s *Service) forwardAll(ctx context.Context, ops []*zlogpb.Op, backups [][]*zlogpb.Replica) []*zlogpb.OpResult {
	type slot struct{ k, b int } // op index, backup index
	byNode := map[string][]slot{}
	var nodes []string
	for k := range ops {
		for b, r := range backups[k] {
			if _, ok := byNode[r.Node]; !ok {
				nodes = append(nodes, r.Node)
			}
			byNode[r.Node] = append(byNode[r.Node], slot{k, b})
		}
	}
	out := make([][]*zlogpb.OpResult, len(ops)) // [op][backup]
	for k := range ops {
		out[k] = make([]*zlogpb.OpResult, len(backups[k]))
	}
	var wg sync.WaitGroup
	for _, node := range nodes {
		slots := byNode[node]
		wg.Add(1)
		go func() {
			defer wg.Done()
			bops := make([]*zlogpb.Op, len(slots))
			for i, sl := range slots {
				op := ops[sl.k]
				bops[i] = &zlogpb.Op{Ref: op.Ref, Pos: op.Pos, Kind: op.Kind, Token: op.Token, Data: op.Data, Epoch: op.Epoch, Device: backups[sl.k][sl.b].Device}
			}
			for i, r := range s.replicateMany(ctx, node, bops) {
				out[slots[i].k][slots[i].b] = r
			}
		}()
	}
	wg.Wait()
	res := make([]*zlogpb.OpResult, len(ops))
	for k, op := range ops {
		res[k] = s.fold(op, backups[k], out[k])
	}
	return res
}

// fold combines the backups' answers to op.
func (s *Service) fold(op *zlogpb.Op, backups []*zlogpb.Replica, out []*zlogpb.OpResult) *zlogpb.OpResult {
	for i, r := range out {
		switch r.Status {
		case zlogpb.Status_STATUS_OK:
			continue
		case zlogpb.Status_STATUS_TAKEN:
			if op.Kind == zlogpb.Kind_KIND_TRIM {
				continue
			}
			// A backup holds another entry than the primary decided:
			// write-once was broken somewhere. Loud, never acknowledged.
			s.metrics.diverged.Inc()
			s.log.Error("log replicas diverged", "log", op.Ref.Log, "segment", op.Ref.Segment, "stripe", op.Ref.Stripe, "pos", op.Pos, "backup", backups[i].Node)
			return &zlogpb.OpResult{Status: zlogpb.Status_STATUS_ERROR, Message: fmt.Sprintf("log: backup %s holds another entry at %d", backups[i].Node, op.Pos)}
		default:
			return r
		}
	}
	return &zlogpb.OpResult{Status: zlogpb.Status_STATUS_OK}
}

// replicateMany sends ops to node's Replicate (directly when node is this
// one), sharing RPCs with other concurrent senders to that node, and
// returns one result per op. A node that cannot be reached answers
// UNAVAILABLE naming it.
func (s *Service) replicateMany(ctx context.Context, node string, ops []*zlogpb.Op) []*zlogpb.OpResult {
	res := make([]*zlogpb.OpResult, len(ops))
	fail := func(st zlogpb.Status, msg string) []*zlogpb.OpResult {
		for i := range res {
			if res[i] == nil {
				res[i] = &zlogpb.OpResult{Status: st, Node: node, Message: msg}
			}
		}
		return res
	}
	if node == s.cfg.Self {
		resp, err := s.Replicate(ctx, &zlogpb.WriteRequest{Ops: ops})
		if err != nil {
			return fail(zlogpb.Status_STATUS_ERROR, err.Error())
		}
		return resp.Results
	}
	addr, ok := s.cfg.Address(node)
	if !ok {
		return fail(zlogpb.Status_STATUS_UNAVAILABLE, "log: node "+node+" has no address")
	}
	b := s.peers.pool.Batcher(addr, "replicate", 1, func(ctx context.Context, c zlogpb.LogClient, ops []*zlogpb.Op) ([]*zlogpb.OpResult, error) {
		ctx, cancel := context.WithTimeout(ctx, s.cfg.Options.PeerTimeout)
		defer cancel()
		r, err := c.Replicate(ctx, &zlogpb.WriteRequest{Ops: ops})
		if err != nil {
			return nil, err
		}
		return r.Results, nil
	})
	out, errs := b.DoMany(ctx, ops)
	for i, err := range errs {
		if err != nil {
			res[i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_UNAVAILABLE, Node: node, Message: err.Error()}
		} else {
			res[i] = out[i]
		}
	}
	return res
}

// trimAt trims a position on the primary and (best effort) its backups.
func (s *Service) trimAt(ctx context.Context, key store.Key, op *zlogpb.Op) *zlogpb.OpResult {
	r := s.store.Trim(op.Device, key, op.Pos)
	if r.Status != store.OK {
		return result(r)
	}
	_ = s.forward(ctx, forwardOf(op, zlogpb.Kind_KIND_TRIM, nil, nil), op.Backups)
	return &zlogpb.OpResult{Status: zlogpb.Status_STATUS_OK}
}

// Replicate is a backup's side of Write (and recovery's settle and
// repair, with Settle set: writes into a sealed replica).
func (s *Service) Replicate(ctx context.Context, req *zlogpb.WriteRequest) (*zlogpb.WriteResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if len(req.Ops) > maxOps {
		return nil, status.Errorf(codes.InvalidArgument, "log: %d ops in one request, limit %d", len(req.Ops), maxOps)
	}
	mode := store.Normal
	if req.Settle {
		mode = store.Settle
	}
	res := make([]*zlogpb.OpResult, len(req.Ops))
	var ps []*store.Pending
	var data [][]byte
	var idx []int
	for i, op := range req.Ops {
		if r := checkOp(op, true); r != nil {
			res[i] = r
			continue
		}
		key := keyOf(op.Ref)
		if op.Kind == zlogpb.Kind_KIND_TRIM {
			res[i] = result(s.store.Trim(op.Device, key, op.Pos))
			continue
		}
		tok, _ := tokenOf(op.Token)
		p, r := s.store.Begin(op.Device, key, op.Pos, op.Epoch, client.KindFromProto(op.Kind), tok, mode)
		if p == nil {
			if r.Status == store.OK {
				r = store.Result{Status: store.OK}
			}
			res[i] = result(r)
			continue
		}
		ps = append(ps, p)
		data = append(data, op.Data)
		idx = append(idx, i)
	}
	for k, err := range store.WriteAll(ps, data) {
		if err != nil {
			res[idx[k]] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_ERROR, Message: err.Error()}
		} else {
			res[idx[k]] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_OK}
		}
	}
	return &zlogpb.WriteResponse{Results: res}, nil
}

// Read answers reads of this node's replicas.
func (s *Service) Read(ctx context.Context, req *zlogpb.ReadRequest) (*zlogpb.WriteResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if len(req.Ops) > maxOps {
		return nil, status.Errorf(codes.InvalidArgument, "log: %d ops in one request, limit %d", len(req.Ops), maxOps)
	}
	res := make([]*zlogpb.OpResult, len(req.Ops))
	for i, op := range req.Ops {
		if r := checkOp(op, false); r != nil {
			res[i] = r
			continue
		}
		if s.behind(op) {
			res[i] = &zlogpb.OpResult{Status: zlogpb.Status_STATUS_STALE_EPOCH}
			continue
		}
		res[i] = result(s.store.Read(op.Device, keyOf(op.Ref), op.Pos, op.Epoch, s.trimPoint(op.Ref.Log)))
	}
	return &zlogpb.WriteResponse{Results: res}, nil
}

// behind reports whether op was made with an older layout than this node
// knows for its log. Such a client must refresh first: a replica its
// layout names may have been closed out since (marked stale while its
// node was down) and, back up but not yet repaired nor sealed, would
// answer "not written" for entries acknowledged elsewhere.
func (s *Service) behind(op *zlogpb.Op) bool {
	name, ok := s.cache.byID(op.Ref.GetLog())
	if !ok {
		return false
	}
	v, ok := s.cache.get(name)
	return ok && op.Epoch < v.Layout.Epoch
}

// trimPoint is the log's prefix trim point as this node knows it.
func (s *Service) trimPoint(id uint64) uint64 {
	name, ok := s.cache.byID(id)
	if !ok {
		return 0
	}
	v, _ := s.cache.get(name)
	return v.Record.TrimBefore
}

// Seal installs an epoch on a replica and reports what it holds, as runs
// of local indexes.
func (s *Service) Seal(ctx context.Context, req *zlogpb.SealRequest) (*zlogpb.SealResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetRef() == nil || req.Device == "" || req.Stripes == 0 || req.Stripes > layout.MaxStripes || req.Epoch == 0 {
		return nil, status.Error(codes.InvalidArgument, "log: seal needs a stripe, device, epoch and width")
	}
	ps, fills, r := s.store.Seal(req.Device, keyOf(req.Ref), req.Epoch)
	switch r.Status {
	case store.OK:
	case store.StaleEpoch:
		return nil, status.Errorf(codes.FailedPrecondition, "log: seal epoch %d is stale", req.Epoch)
	default:
		return nil, status.Error(codes.Internal, fmt.Sprint(r.Err))
	}
	out := &zlogpb.SealResponse{Epoch: req.Epoch}
	for _, run := range layout.Runs(localIndexes(ps, int(req.Stripes))) {
		out.Runs = append(out.Runs, run.Start, run.End)
	}
	for _, run := range layout.Runs(localIndexes(fills, int(req.Stripes))) {
		out.FillRuns = append(out.FillRuns, run.Start, run.End)
	}
	return out, nil
}

func localIndexes(ps []uint64, w int) []uint64 {
	locals := make([]uint64, len(ps))
	for i, p := range ps {
		locals[i] = layout.Local(p, w)
	}
	return locals
}

// Reset voids a replica's entries (repair refills it).
func (s *Service) Reset(ctx context.Context, req *zlogpb.ResetRequest) (*zlogpb.Empty, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetRef() == nil || req.Device == "" {
		return nil, status.Error(codes.InvalidArgument, "log: reset needs a stripe and device")
	}
	if err := s.store.Reset(req.Device, keyOf(req.Ref)); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &zlogpb.Empty{}, nil
}

// maxDump bounds the entries one Dump returns.
const maxDump = 1024

// Dump returns a replica's entries from a position on (settle, repair).
func (s *Service) Dump(ctx context.Context, req *zlogpb.DumpRequest) (*zlogpb.DumpResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetRef() == nil || req.Device == "" {
		return nil, status.Error(codes.InvalidArgument, "log: dump needs a stripe and device")
	}
	limit := int(req.Limit)
	if limit <= 0 || limit > maxDump {
		limit = maxDump
	}
	es, next, err := s.store.Dump(req.Device, keyOf(req.Ref), req.From, limit)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	out := &zlogpb.DumpResponse{Next: next}
	for _, e := range es {
		out.Entries = append(out.Entries, &zlogpb.Op{Ref: req.Ref, Pos: e.Pos, Kind: client.KindToProto(e.Kind),
			Token: append([]byte(nil), e.Token[:]...), Data: e.Data})
	}
	return out, nil
}

// Ping answers liveness probes.
func (s *Service) Ping(ctx context.Context, _ *zlogpb.Empty) (*zlogpb.Empty, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	return &zlogpb.Empty{}, nil
}
