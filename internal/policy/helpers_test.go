package policy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/model"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func newKV(t *testing.T) *meta.Pebble {
	t.Helper()
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

func newManager(t *testing.T, kv meta.KV, node string) *Manager {
	t.Helper()
	m := NewManager(kv, Options{Node: node, Logger: quiet, ResyncEvery: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

var testNow = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// testSnapshot is three nodes on two racks, each with an ssd and an hdd.
func testSnapshot() *model.Snapshot {
	var nodes []model.Node
	var devs []model.Device
	for i := 1; i <= 3; i++ {
		id := model.NodeID(fmt.Sprintf("n%d", i))
		rack := fmt.Sprintf("r%d", (i-1)%2+1)
		nodes = append(nodes, model.Node{ID: id, Rack: rack, Up: true})
		devs = append(devs,
			model.Device{ID: model.DeviceID(string(id) + "/ssd0"), Node: id, Rack: rack, Tier: model.TierSSD,
				CapacityBytes: 100 << 30, UsedBytes: int64(i) * 10 << 30, QueueLen: i},
			model.Device{ID: model.DeviceID(string(id) + "/hdd0"), Node: id, Rack: rack, Tier: model.TierHDD,
				CapacityBytes: 1 << 40, UsedBytes: int64(i) * 100 << 30})
	}
	return model.NewSnapshot(testNow, nodes, devs)
}

func testEnv() Env {
	return Env{Snapshot: testSnapshot, Self: "n1"}
}

// put commits a policy through the manager, failing the test on error.
func put(t *testing.T, m *Manager, name string, hook Hook, src string) PutResult {
	t.Helper()
	res, err := m.Put(context.Background(), PutRequest{Name: name, Hook: hook, Source: src, Author: "test", IfVersion: -1}, testEnv())
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	return res
}

// waitVersion waits until m runs version v of name.
func waitVersion(t *testing.T, m *Manager, name string, v int64, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for time.Since(start) < d {
		for _, st := range m.Status() {
			if st.Name == name && st.Version == v {
				return time.Since(start)
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%s version %d not live after %s: %+v", name, v, d, m.Status())
	return 0
}

func newKVB(b *testing.B) *meta.Pebble {
	b.Helper()
	kv, err := meta.OpenPebble(filepath.Join(b.TempDir(), "meta"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kv.Close() })
	return kv
}

func exampleB(b *testing.B, name string) string {
	b.Helper()
	src, err := os.ReadFile("../../examples/policies/" + name + ".lua")
	if err != nil {
		b.Fatal(err)
	}
	return string(src)
}
