package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
)

const fitA = "function fitness(d) return 1 end"
const fitB = "function fitness(d) return 2 end"

func TestRegistryVersionsHistoryAndCAS(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newKV(t), nil)
	commit := func(c Change) Record {
		t.Helper()
		if c.IfVersion == 0 && c.Comment != "new" {
			c.IfVersion = -1
		}
		rec, _, err := r.Commit(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	v1 := commit(Change{Name: "fit", Hook: HookFitness, Source: fitA, Author: "ana", Comment: "new"})
	v2 := commit(Change{Name: "fit", Hook: HookFitness, Source: fitB, Author: "bo"})
	if v1.Version != 1 || v2.Version != 2 || v2.Author != "bo" || v2.SHA256 == v1.SHA256 {
		t.Fatalf("versions: %+v %+v", v1, v2)
	}
	// Compare-and-swap on the version.
	if _, _, err := r.Commit(ctx, Change{Name: "fit", Hook: HookFitness, Source: fitA, IfVersion: 1}); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("stale if-version: %v", err)
	}
	if _, _, err := r.Commit(ctx, Change{Name: "new", Hook: HookClass, Source: "function m() end", IfVersion: 0}); err != nil {
		t.Fatalf("if-version 0 on a new name: %v", err)
	}
	// One policy per singleton hook; a name keeps its hook.
	if _, _, err := r.Commit(ctx, Change{Name: "other", Hook: HookFitness, Source: fitA, IfVersion: -1}); !errors.Is(err, ErrHookTaken) {
		t.Fatalf("second fitness policy: %v", err)
	}
	if _, _, err := r.Commit(ctx, Change{Name: "fit", Hook: HookRule, Source: "function cost() return 0 end", IfVersion: -1}); !errors.Is(err, ErrHookMismatch) {
		t.Fatalf("hook change: %v", err)
	}
	// rm is a tombstone: the slot frees, numbering continues.
	rm := commit(Change{Name: "fit", Deleted: true, Author: "ana"})
	if !rm.Deleted || rm.Version != 3 || rm.Hook != HookFitness {
		t.Fatalf("tombstone: %+v", rm)
	}
	if _, _, err := r.Commit(ctx, Change{Name: "fit", Deleted: true, IfVersion: -1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rm twice: %v", err)
	}
	commit(Change{Name: "other", Hook: HookFitness, Source: fitA})
	hist, err := r.History(ctx, "fit")
	if err != nil || len(hist) != 3 || hist[0].Source != fitA || hist[1].Source != fitB || !hist[2].Deleted {
		t.Fatalf("history: %+v %v", hist, err)
	}
	old, err := r.Version(ctx, "fit", 1)
	if err != nil || old.Source != fitA {
		t.Fatalf("version 1: %+v %v", old, err)
	}
	if _, err := r.Version(ctx, "fit", 9); !errors.Is(err, ErrVersionNotFound) {
		t.Fatalf("missing version: %v", err)
	}
	if _, _, err := r.Commit(ctx, Change{Name: "Bad Name", Hook: HookClass, Source: "x"}); err == nil {
		t.Fatal("invalid name accepted")
	}
}

// TestRegistryConcurrentPuts races writers on one name: every put gets
// its own version, none is lost.
func TestRegistryConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newKV(t), nil)
	const writers, each = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				src := fmt.Sprintf("-- writer %d put %d\nfunction m() end", w, i)
				if _, _, err := r.Commit(ctx, Change{Name: "c", Hook: HookClass, Source: src, IfVersion: -1}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hist, err := r.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != writers*each {
		t.Fatalf("%d versions for %d puts", len(hist), writers*each)
	}
	seen := map[string]bool{}
	for i, h := range hist {
		if h.Version != int64(i+1) {
			t.Fatalf("version %d at position %d", h.Version, i)
		}
		seen[h.Source] = true
	}
	if len(seen) != writers*each {
		t.Fatalf("%d distinct sources kept of %d", len(seen), writers*each)
	}
}

func TestRegistryTrimsHistory(t *testing.T) {
	ctx := context.Background()
	r := NewRegistry(newKV(t), nil)
	r.historyLimit = 5
	for i := 0; i < 12; i++ {
		if _, _, err := r.Commit(ctx, Change{Name: "c", Hook: HookClass, Source: fmt.Sprintf("function m%d() end", i), IfVersion: -1}); err != nil {
			t.Fatal(err)
		}
	}
	hist, err := r.History(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 5 || hist[0].Version != 8 || hist[4].Version != 12 {
		t.Fatalf("kept %d versions from %d", len(hist), hist[0].Version)
	}
}
