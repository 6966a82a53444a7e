package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

func TestTieringSchedulerConfig(t *testing.T) {
	dir := t.TempDir()
	good, _ := learn.Pretrained()
	b, _ := good.Marshal()
	goodPath := filepath.Join(dir, "model.json")
	os.WriteFile(goodPath, b, 0o644)
	badPath := filepath.Join(dir, "bad.json")
	os.WriteFile(badPath, []byte(`{"version":1}`), 0o644)
	for _, c := range []struct {
		sched, model, want string
	}{
		{"", "", ""},
		{"threshold", "", ""},
		{"qlearning", "", ""},
		{"QLearning", goodPath, ""},
		{"sarsa", "", "want threshold or qlearning"},
		{"qlearning", filepath.Join(dir, "missing.json"), "tiering_model"},
		{"qlearning", badPath, "tiering_model"},
		{"threshold", goodPath, "the model is for qlearning"},
	} {
		cfg := Config{}
		cfg.EnsureDefaults()
		cfg.Curator.TieringScheduler, cfg.Curator.TieringModel = c.sched, c.model
		_, err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("scheduler %q model %q: got %v, want %q", c.sched, c.model, err, c.want)
		}
	}
}

// A node configured with qlearning runs the learned scheduler, and its
// signals report client operations and their latency from the real
// object layer.
func TestTieringSchedulerWiring(t *testing.T) {
	n := openNode(t, func(c *Config) {
		c.Curator = CuratorConfig{TieringScheduler: "qlearning"}
		c.RootPassword = "password123"
	})
	sched, signals := n.tieringScheduler(n.Layer)
	if _, ok := sched.(*tiersched.QLearning); !ok || signals == nil {
		t.Fatalf("qlearning configured, got %T (signals %v)", sched, signals != nil)
	}
	if st := n.Curator.TieringStatus(); st.Scheduler != "qlearning" {
		t.Fatalf("curator status scheduler %q", st.Scheduler)
	}
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil && !strings.Contains(err.Error(), "exist") {
		t.Fatal(err)
	}
	signals() // baseline
	for i := range 20 {
		p := bytes.Repeat([]byte{byte(i)}, 4096)
		if _, err := n.Layer.Put(ctx, "bkt", "k", bytes.NewReader(p), object.PutOptions{Size: int64(len(p))}); err != nil {
			t.Fatal(err)
		}
		_, rc, err := n.Layer.Get(ctx, "bkt", "k", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
	}
	time.Sleep(10 * time.Millisecond)
	o := signals()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Ops != 40 || o.LatencyMs <= 0 || o.ReadIOPS <= 0 || o.WriteIOPS <= 0 {
		t.Fatalf("signals after 20 puts and 20 gets: %s", o)
	}
	if o.Mem <= 0 {
		t.Logf("no memory signal on this platform: %s", o)
	}
}
