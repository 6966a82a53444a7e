package cluster

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/terrace-storage/terrace/internal/meta"
)

// EtcdKV implements meta.KV on etcd v3. Compare-and-swap maps to etcd's
// ModRevision compare (CreateRevision == 0 for "must not exist"), so the
// typed maps and every caller behave exactly as on Pebble. etcd batches
// concurrent proposals into raft entries, which is the group commit.
type EtcdKV struct {
	c *clientv3.Client
}

var _ meta.KV = (*EtcdKV)(nil)

// NewEtcdKV wraps a client.
func NewEtcdKV(c *clientv3.Client) *EtcdKV { return &EtcdKV{c: c} }

// Client returns the etcd client (membership uses leases directly).
func (e *EtcdKV) Client() *clientv3.Client { return e.c }

// Get implements meta.KV.
func (e *EtcdKV) Get(ctx context.Context, key []byte) (meta.Item, error) {
	resp, err := e.c.Get(ctx, string(key))
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
	resp, err := e.c.Get(ctx, string(key), clientv3.WithSerializable())
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
	opts := []clientv3.OpOption{clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend)}
	if end == nil {
		opts = append(opts, clientv3.WithFromKey())
	} else {
		opts = append(opts, clientv3.WithRange(string(end)))
	}
	if limit > 0 {
		opts = append(opts, clientv3.WithLimit(int64(limit)))
	}
	resp, err := e.c.Get(ctx, string(start), opts...)
	if err != nil {
		return nil, fmt.Errorf("meta: etcd scan: %w", err)
	}
	out := make([]meta.Item, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, meta.Item{Key: kv.Key, Value: kv.Value, ModRev: kv.ModRevision})
	}
	return out, nil
}

// Commit implements meta.KV.
func (e *EtcdKV) Commit(ctx context.Context, t *meta.Txn) (int64, error) {
	if len(t.Ops) == 0 {
		return 0, errors.New("meta: empty transaction")
	}
	if len(t.Ops)+len(t.Cmps) > meta.MaxTxnOps+16 {
		return 0, fmt.Errorf("meta: transaction has %d ops, limit %d", len(t.Ops), meta.MaxTxnOps)
	}
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
		if len(op.Value) > meta.MaxValueBytes {
			return 0, fmt.Errorf("meta: value for %q is %d bytes, limit %d", op.Key, len(op.Value), meta.MaxValueBytes)
		}
		if op.Delete {
			ops = append(ops, clientv3.OpDelete(string(op.Key)))
		} else {
			ops = append(ops, clientv3.OpPut(string(op.Key), string(op.Value)))
		}
	}
	resp, err := e.c.Txn(ctx).If(cmps...).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("meta: etcd commit: %w", err)
	}
	if !resp.Succeeded {
		return 0, meta.ErrConflict
	}
	return resp.Header.Revision, nil
}

// Watch implements meta.KV.
func (e *EtcdKV) Watch(ctx context.Context, prefix []byte) <-chan meta.Event {
	out := make(chan meta.Event, 1024)
	wc := e.c.Watch(ctx, string(prefix), clientv3.WithPrefix())
	go func() {
		defer close(out)
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
func (e *EtcdKV) Close() error { return e.c.Close() }
