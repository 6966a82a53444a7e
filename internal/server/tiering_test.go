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

// The tiering thresholds are fractions of a tier's capacity, and the
// learned scheduler's safety rules shed to f − h: a value written as a
// percentage (75 for 0.75) or a negative one must be refused, not turn
// tiering off (f = 75 is never exceeded) or shed a whole tier (h = 15).
func TestTieringThresholdConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		set  func(*CuratorConfig)
		want string
	}{
		{"defaults", func(*CuratorConfig) {}, ""},
		{"fractions", func(c *CuratorConfig) {
			c.TierDownAbove, c.TierDestBelow, c.TierReduce, c.BalanceMean, c.BalanceSpread = 0.8, 0.9, 0.1, 0.3, 0.1
		}, ""},
		{"f as a percentage", func(c *CuratorConfig) { c.TierDownAbove = 75 }, "tier_down_above"},
		{"h as a percentage", func(c *CuratorConfig) { c.TierReduce = 15 }, "tier_reduce"},
		{"d above 1", func(c *CuratorConfig) { c.TierDestBelow = 90 }, "tier_dest_below"},
		{"negative m", func(c *CuratorConfig) { c.BalanceMean = -0.1 }, "balance_mean"},
		{"s above 1", func(c *CuratorConfig) { c.BalanceSpread = 2 }, "balance_spread"},
		{"negative check interval", func(c *CuratorConfig) { c.TierCheckInterval = -time.Second }, "tier_check_interval"},
		{"negative hot window", func(c *CuratorConfig) { c.HotWindow = -time.Minute }, "hot_window"},
		{"negative promote reads", func(c *CuratorConfig) { c.PromoteReads = -1 }, "promote_reads"},
	} {
		cfg := Config{}
		cfg.EnsureDefaults()
		c.set(&cfg.Curator)
		_, err := cfg.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}
