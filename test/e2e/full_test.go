package e2e

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestFullDevice fills small devices until writes fail. The failure must
// be a clean 507 InsufficientStorage naming the constraint; the server
// keeps serving; every object stored before reads back byte-identical,
// also after deletes and after a restart of the full node.
func TestFullDevice(t *testing.T) {
	dir := t.TempDir()
	spec := serverSpec{
		dataDir: filepath.Join(dir, "data"),
		devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":8MiB", "hdd:" + filepath.Join(dir, "hdd0") + ":8MiB"},
		vector:  "ssd=1,hdd=1",
		config:  noCurator,
	}
	srv := startServer(t, spec)
	c := srv.client()
	if err := c.createBucket("full", ""); err != nil {
		t.Fatal(err)
	}
	stored := map[string][]byte{}
	var fullErr *apiErr
	for i := 0; i < 200; i++ {
		key := fmt.Sprintf("obj-%03d", i)
		data := content(9, key, 0, 100<<10, 700<<10)
		err := c.put("full", key, data)
		if err == nil {
			stored[key] = data
			continue
		}
		if !errors.As(err, &fullErr) {
			t.Fatalf("PUT %s on a filling device: %v", key, err)
		}
		break
	}
	if fullErr == nil {
		t.Fatalf("stored %d objects on 8 MiB devices without an error", len(stored))
	}
	t.Logf("stored %d objects, then: %v", len(stored), fullErr)
	if fullErr.Status != 507 || fullErr.Code != "InsufficientStorage" {
		t.Errorf("full device: got %v, want HTTP 507 InsufficientStorage", fullErr)
	}
	if msg := strings.ToLower(fullErr.Msg); !strings.Contains(msg, "insufficient storage") ||
		!(strings.Contains(msg, "full") || strings.Contains(msg, "capacity") || strings.Contains(msg, "space")) {
		t.Errorf("full device error does not name the constraint: %q", fullErr.Msg)
	}
	if len(stored) < 5 {
		t.Fatalf("only %d objects fit on 8 MiB devices", len(stored))
	}
	// Later writes keep failing the same way, small or large, and the
	// node keeps serving.
	for _, size := range []int{1 << 10, 3 << 20} {
		err := c.put("full", fmt.Sprintf("late-%d", size), content(9, "late", size, size, size))
		var ae *apiErr
		if err == nil {
			// A small object may still fit in the remaining space.
			if size > 1<<20 {
				t.Errorf("a %d-byte PUT succeeded on a full node", size)
			}
			continue
		}
		if !errors.As(err, &ae) || ae.Status != 507 {
			t.Errorf("%d-byte PUT on a full node: %v, want 507", size, err)
		}
	}
	if !srv.alive() {
		t.Fatalf("server died on a full device; log:\n%s", srv.log())
	}
	check := func(when string) {
		t.Helper()
		for key, want := range stored {
			got, err := c.get("full", key)
			if err != nil {
				t.Fatalf("%s: GET %s: %v", when, key, err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s: GET %s: %s", when, key, diff(got, want))
			}
		}
		rep, err := c.report()
		if err != nil {
			t.Fatalf("%s: tier report: %v", when, err)
		}
		for _, d := range rep.Devices {
			if d.BadReplicas != 0 {
				t.Errorf("%s: device %s has %d bad replicas", when, d.ID, d.BadReplicas)
			}
		}
	}
	check("after filling")

	// Deleting half the objects touches only metadata; the rest stay intact.
	n := 0
	for key := range stored {
		if n%2 == 0 {
			if err := c.del("full", key); err != nil {
				t.Fatalf("DELETE %s: %v", key, err)
			}
			if _, err := c.get("full", key); err == nil {
				t.Fatalf("GET %s after delete succeeded", key)
			}
			delete(stored, key)
		}
		n++
	}
	check("after deletes")

	// A full node restarts: recovery and the start-up device probe must
	// cope with devices that have no room left.
	srv.stop()
	srv = startServer(t, spec)
	t.Logf("recovery on full devices: %v", srv.recoveryReport())
	c = srv.client()
	check("after restart")
	if out, err := srv.cli("tier", "report"); err != nil {
		t.Errorf("terrace tier report: %v\n%s", err, out)
	} else {
		t.Logf("tier report on the full node:\n%s", out)
	}
}
