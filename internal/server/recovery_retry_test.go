package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/object"
)

// TestRecoveryRetriesTransientErrors: a cluster node whose start-up
// recovery meets a metadata timeout tries again instead of exiting; a
// single node (no retry window) and a persistent error still fail.
func TestRecoveryRetriesTransientErrors(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	timeout := errors.New("meta: etcd commit: etcdserver: request timed out, possibly due to connection lost")
	calls := 0
	flaky := func(context.Context) (object.RecoveryReport, error) {
		calls++
		if calls < 3 {
			return object.RecoveryReport{}, timeout
		}
		return object.RecoveryReport{Egroups: 7}, nil
	}
	rep, err := recoverRetry(context.Background(), flaky, time.Minute, log)
	if err != nil || rep.Egroups != 7 || calls != 3 {
		t.Fatalf("flaky recovery: %v, report %+v, %d calls", err, rep, calls)
	}
	calls = 0
	if _, err := recoverRetry(context.Background(), flaky, 0, log); !errors.Is(err, timeout) || calls != 1 {
		t.Fatalf("no retry window: %v after %d calls", err, calls)
	}
	always := func(context.Context) (object.RecoveryReport, error) { return object.RecoveryReport{}, timeout }
	if _, err := recoverRetry(context.Background(), always, 2500*time.Millisecond, log); !errors.Is(err, timeout) || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("persistent error: %v", err)
	}
	if got := recoveryRetryLimit(Config{}); got != 0 {
		t.Fatalf("single node retry limit %s", got)
	}
	if got := recoveryRetryLimit(Config{InitialCluster: "n1=http://x:1"}); got == 0 {
		t.Fatal("cluster node does not retry")
	}
}
