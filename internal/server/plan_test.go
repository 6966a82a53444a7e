package server

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/policy"
)

// TestPlanWeighsLuaRules: a live Lua rule policy joins every plan on a
// real node as lua.NAME and moves replicas like a built-in rule; after
// the policy is removed, plans no longer carry it; a rule set naming a
// policy that is not live is refused with a clear error.
func TestPlanWeighsLuaRules(t *testing.T) {
	n := openNode(t, func(c *Config) {
		c.Devices = []string{"hdd:" + filepath.Join(c.DataDir, "hdd0") + ":256MiB", "hdd:" + filepath.Join(c.DataDir, "hdd1") + ":256MiB"}
		c.DefaultVector = "hdd=1"
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vec, _ := model.ParseVector("hdd=1")
	if err := n.Layer.CreateBucket(ctx, "lua-rules", "", vec); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		body := bytes.Repeat([]byte{byte(i)}, 30000)
		if _, err := n.Layer.Put(ctx, "lua-rules", fmt.Sprintf("k%02d", i), bytes.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Layer.SealIdle(ctx, -1); err != nil {
		t.Fatal(err)
	}
	// The rule charges for replicas on whichever device placement chose
	// first (small objects share pooled egroups, so both devices may not
	// hold one).
	egs, _, err := n.Curator.ScanEgroups(ctx)
	if err != nil || len(egs) == 0 || len(egs[0].Replicas) == 0 {
		t.Fatalf("scan: %v, %d egroups", err, len(egs))
	}
	from := string(egs[0].Replicas[0].Device)
	to := string(n.Devices[0].ID())
	if to == from {
		to = string(n.Devices[1].ID())
	}
	src := fmt.Sprintf(`scope = "egroup"
function cost(view)
  local c = 0
  for _, r in ipairs(view.replicas) do
    if r.device == %q then c = c + 1 end
  end
  return c
end`, from)
	if _, err := n.Policies.Put(ctx, policy.PutRequest{Name: "off-first", Hook: policy.HookRule, Source: src, Author: "test", IfVersion: -1}, n.policyEnv()); err != nil {
		t.Fatal(err)
	}
	waitRules(t, n, []string{"off-first"})
	p, err := n.Curator.Plan(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Rules, "lua.off-first") {
		t.Fatalf("plan rules %q lack the live Lua rule", p.Rules)
	}
	if len(p.Moves) == 0 {
		t.Fatalf("no moves: the Lua rule did not act (cost %s -> %s)", p.CostBefore, p.CostAfter)
	}
	for _, mv := range p.Moves {
		if mv.From != from || mv.To != to || !slices.Contains(mv.Rules, "lua.off-first") {
			t.Fatalf("move %+v: want %s -> %s for lua.off-first", mv, from, to)
		}
	}
	if len(p.RuleErrors) != 0 {
		t.Fatalf("rule errors: %v", p.RuleErrors)
	}
	// weight=0 in the rule set keeps the rule but not its soft cost.
	if p, err := n.Curator.Plan(ctx, "rplset_durable\nlua.off-first weight=0", nil); err != nil || len(p.Moves) != 0 {
		t.Fatalf("weight=0: %v, %d moves", err, len(p.Moves))
	}

	if _, err := n.Policies.Remove(ctx, "off-first", "test", -1); err != nil {
		t.Fatal(err)
	}
	waitRules(t, n, nil)
	if p, err := n.Curator.Plan(ctx, "", nil); err != nil || strings.Contains(p.Rules, "lua.") || len(p.Moves) != 0 {
		t.Fatalf("after removal: %v, rules %q, %d moves", err, p.Rules, len(p.Moves))
	}
	_, err = n.Curator.Plan(ctx, "rplset_durable\nlua.off-first", nil)
	if err == nil || !strings.Contains(err.Error(), "not live") {
		t.Fatalf("a rule set naming a removed policy: %v", err)
	}
}

func waitRules(t *testing.T, n *Node, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var got []string
		for _, r := range n.Policies.Rules() {
			got = append(got, r.Name())
		}
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("live rules %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
