package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// TestFaultInjectionRefusedUnlessEnabled: the device-fault endpoint is a
// test hook; a node without --fault-injection refuses it (403, even signed)
// and a node with it injects and clears faults, validating its input.
func TestFaultInjectionRefusedUnlessEnabled(t *testing.T) {
	off := openNode(t, nil)
	s := httptest.NewServer(off.AdminHandler())
	defer s.Close()
	root := adminauth.Client(off.Config.RootUser, off.Config.RootPassword)
	dev := string(off.Devices[0].ID())
	post := func(c *http.Client, base, q string) int {
		t.Helper()
		resp, err := c.Post(base+"/v1/debug/fault?"+q, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(root, s.URL, "device="+dev+"&full=1"); got != http.StatusForbidden {
		t.Fatalf("fault injection on a node without --fault-injection: %d, want 403", got)
	}
	if f := off.Devices[0].InjectedFault(); !f.IsZero() {
		t.Fatalf("refused request injected %v", f)
	}

	on := openNode(t, func(c *Config) { c.FaultInjection = true })
	so := httptest.NewServer(on.AdminHandler())
	defer so.Close()
	dev = string(on.Devices[0].ID())
	if got := post(http.DefaultClient, so.URL, "device="+dev+"&full=1"); got != http.StatusUnauthorized {
		t.Fatalf("unsigned fault injection: %d, want 401", got)
	}
	for _, bad := range []string{"device=nope&full=1", "device=" + dev + "&read_err=2", "device=" + dev + "&latency=forever", "device=" + dev + "&full=maybe"} {
		if got := post(root, so.URL, bad); got != http.StatusBadRequest {
			t.Errorf("POST ?%s: %d, want 400", bad, got)
		}
	}
	if got := post(root, so.URL, "device="+dev+"&full=1&latency=5ms"); got != http.StatusOK {
		t.Fatalf("fault injection: %d", got)
	}
	if f := on.Devices[0].InjectedFault(); !f.Full || f.Latency.Milliseconds() != 5 {
		t.Fatalf("injected %v", f)
	}
	resp, err := root.Get(so.URL + "/v1/debug/fault")
	if err != nil {
		t.Fatal(err)
	}
	var list []FaultState
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list) != len(on.Devices) || !list[0].Fault.Full {
		t.Fatalf("fault list %+v", list)
	}
	if got := post(root, so.URL, "device="+dev); got != http.StatusOK {
		t.Fatalf("clear: %d", got)
	}
	if f := on.Devices[0].InjectedFault(); !f.IsZero() {
		t.Fatalf("after clear: %v", f)
	}
}
