package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/terrace-storage/terrace/internal/meta"
)

// TestMergedCommitWithALostAnswerIsUncertain: a merged transaction that
// lands but whose answer is lost (the connection reset after the request
// was sent) must not be reported as a conflict to its parts: a conflict
// promises that nothing changed, and a writer told so undoes data that its
// committed record names. Each part gets an error of unknown outcome.
func TestMergedCommitWithALostAnswerIsUncertain(t *testing.T) {
	ports := freePorts(t, 2)
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	m, err := StartMember(MemberConfig{Name: "m1", DataDir: t.TempDir(), PeerURL: peer, ClientURL: client, InitialCluster: "m1=" + peer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if tr, ok := req.(*etcdserverpb.TxnRequest); ok {
			if len(tr.Success) > 0 && tr.Success[0].GetRequestTxn() != nil {
				if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
					return err
				}
				// landed; the answer is lost
				return status.Error(codes.Unavailable, "error reading from server: connection reset by peer")
			}
			// a single transaction: slow, so that others queue and merge
			time.Sleep(300 * time.Millisecond)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithChainUnaryInterceptor(icpt)}})
	if err != nil {
		t.Fatal(err)
	}
	kv := NewEtcdKVWith(c, EtcdOptions{GroupCommit: true, Committers: 1})
	t.Cleanup(func() { kv.Close() })
	ctx := context.Background()

	var first meta.Txn
	first.Put([]byte("warm"), []byte("x"))
	go kv.Commit(ctx, &first) // occupies the single committer for 300ms
	time.Sleep(50 * time.Millisecond)

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var t meta.Txn
			k := []byte(fmt.Sprintf("k%d", i))
			t.If(k, 0)
			t.Put(k, []byte("v"))
			_, errs[i] = kv.Commit(ctx, &t)
		}()
	}
	wg.Wait()
	failed := 0
	for _, err := range errs {
		if err != nil {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no part saw the lost answer: the merged transaction was not exercised")
	}
	for i, err := range errs {
		_, gerr := kv.Get(ctx, []byte(fmt.Sprintf("k%d", i)))
		t.Logf("part %d: commit err=%v; key present=%v", i, err, gerr == nil)
		if errors.Is(err, meta.ErrConflict) && gerr == nil {
			t.Errorf("part %d: reported ErrConflict (nothing changed) but its write landed", i)
		}
	}
}
