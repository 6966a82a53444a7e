package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// openNode opens a real single node (Pebble, directory devices) without
// serving it.
func openNode(t *testing.T, mod func(*Config)) *Node {
	t.Helper()
	n, err := openNodeAt(t.TempDir(), mod)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

// openNodeAt opens a node whose data lives under dir.
func openNodeAt(dir string, mod func(*Config)) (*Node, error) {
	cfg := Config{DataDir: dir, ProbeBytes: 64 << 10, Devices: []string{
		"ssd:" + filepath.Join(dir, "ssd0") + ":256MiB", "hdd:" + filepath.Join(dir, "hdd0") + ":256MiB"},
		DefaultVector: "any=1", Curator: CuratorConfig{Disabled: true}}
	if mod != nil {
		mod(&cfg)
	}
	return Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func status(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestAdminAPIIsAuthenticated: every admin endpoint refuses unsigned
// requests (401) and requests signed with the wrong secret (403), and
// serves the root account's signed requests; metrics and health open only
// when configured.
func TestAdminAPIIsAuthenticated(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	wrong := adminauth.Client(n.Config.RootUser, "not-the-secret")
	for _, path := range []string{"/v1/status", "/v1/health", "/metrics", "/v1/buckets", "/v1/tier/report", "/debug/pprof/"} {
		if got := status(t, http.DefaultClient, s.URL+path); got != http.StatusUnauthorized {
			t.Errorf("unsigned GET %s: %d, want 401", path, got)
		}
		if got := status(t, wrong, s.URL+path); got != http.StatusForbidden {
			t.Errorf("wrongly signed GET %s: %d, want 403", path, got)
		}
		if got := status(t, root, s.URL+path); got != http.StatusOK {
			t.Errorf("signed GET %s: %d, want 200", path, got)
		}
	}
	req, _ := http.NewRequest("PUT", s.URL+"/v1/buckets/sneaky", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unsigned bucket create: %v %v", resp, err)
	}
	if _, _, err := n.Layer.GetBucket(context.Background(), "sneaky"); err == nil {
		t.Fatal("an unsigned request created a bucket")
	}

	open := openNode(t, func(c *Config) { c.AdminPublic = []string{"metrics", "health"} })
	so := httptest.NewServer(open.AdminHandler())
	defer so.Close()
	for path, want := range map[string]int{"/metrics": 200, "/v1/health": 200, "/v1/status": 401} {
		if got := status(t, http.DefaultClient, so.URL+path); got != want {
			t.Errorf("admin_public metrics,health: unsigned GET %s: %d, want %d", path, got, want)
		}
	}
}

// TestCuratorMapForms: a worker's map endpoint streams an egroup
// partition as records or, asked for it, in the compact form; both read
// back to the same number of egroups, and a form it does not know is a
// clear 400.
func TestCuratorMapForms(t *testing.T) {
	n := openNode(t, nil)
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "maps", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		// Distinct vectors: several egroups.
		v := model.MustParseVector([]string{"ssd=1", "hdd=1", "any=1"}[i%3])
		if _, err := n.Layer.Put(ctx, "maps", fmt.Sprint(i), strings.NewReader("x"), object.PutOptions{Size: 1, Vector: v}); err != nil {
			t.Fatal(err)
		}
	}
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	part := curator.Partition{Name: "egroups/0", Lo: 0, Hi: 1 << 40}
	count := func(form string) (int, int) {
		t.Helper()
		resp, err := root.Get(fmt.Sprintf("%s/v1/curator/map?part=egroups/0&lo=0&hi=%d&form=%s", s.URL, part.Hi, form))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, len(b)
		}
		out, err := curator.ReadMapStream(resp.Body, part)
		if err != nil {
			t.Fatalf("form %q: %v", form, err)
		}
		return resp.StatusCode, len(out.Records)
	}
	_, records := count("records")
	_, compact := count("compact")
	if records < 3 || compact != records {
		t.Fatalf("%d egroups as records, %d compact; want the same, at least 3", records, compact)
	}
	if code, _ := count("protobuf"); code != http.StatusBadRequest {
		t.Fatalf("an unknown form: %d, want 400", code)
	}
}

// TestCuratorShuffleEndpoints: a master's pushed chunk of shuffled
// references is kept by the reducer (204) and joined by the reduce of
// its extent partition through the map endpoint; a chunk that does not
// belong where it claims, a body that is not a chunk, a spec that is not
// JSON, and an unsigned push are refused.
func TestCuratorShuffleEndpoints(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	dst := curator.Partition{Name: "extents/3", Lo: 1 << 50, Hi: 1<<50 + 99}
	chunk := func(id uint64) []byte {
		seq := uint32(1)<<30 | 2<<26 | 7 // objects/2, record 7
		var b bytes.Buffer
		if err := curator.WriteShuffleChunk(&b, curator.ShuffleChunk{Names: []string{"b"}, Refs: []curator.ShuffleRef{{ID: id, Seq: seq, Bucket: 1}}}); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	push := func(c *http.Client, query string, body []byte) int {
		t.Helper()
		resp, err := c.Post(s.URL+"/v1/curator/shuffle?"+query, "application/x-gob", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	q := fmt.Sprintf("id=m-1&dst=%s&lo=%d&hi=%d&src=objects/2&mapper=n2", dst.Name, dst.Lo, dst.Hi)
	for name, tc := range map[string]struct {
		c     *http.Client
		query string
		body  []byte
		want  int
	}{
		"outside the range": {root, q, chunk(dst.Hi + 1), http.StatusBadRequest},
		"not a chunk":       {root, q, []byte("hello"), http.StatusBadRequest},
		"no range":          {root, "id=m-1&dst=extents/3&src=objects/2&mapper=n2", chunk(dst.Lo), http.StatusBadRequest},
		"owner as dst":      {root, strings.Replace(q, "dst=extents/3", "dst=objects/3", 1), chunk(dst.Lo), http.StatusBadRequest},
		"unsigned":          {http.DefaultClient, q, chunk(dst.Lo), http.StatusUnauthorized},
		"good":              {root, q, chunk(dst.Lo + 5), http.StatusNoContent},
	} {
		if got := push(tc.c, tc.query, tc.body); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
	mapURL := func(spec string) string {
		return fmt.Sprintf("%s/v1/curator/map?part=%s&lo=%d&hi=%d&form=compact&shuffle=%s", s.URL, dst.Name, dst.Lo, dst.Hi, url.QueryEscape(spec))
	}
	resp, err := root.Get(mapURL("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a spec that is not JSON: %d, want 400", resp.StatusCode)
	}
	// The reduce routes extents onward to the egroup reducers: all here.
	routes := []curator.ShuffleRoute{{Part: "egroups/0", Lo: 0, Hi: 1 << 40, Node: model.NodeID(n.Config.NodeID)},
		{Part: "egroups/1", Lo: 1<<40 + 1, Hi: math.MaxUint64, Node: model.NodeID(n.Config.NodeID)}}
	dst.Shuffle = &curator.ShuffleSpec{ID: "m-1", Routes: routes, Expect: []curator.ShuffleSource{{Src: "objects/2", Mapper: "n2", Count: 1}}}
	spec, _ := json.Marshal(dst.Shuffle)
	resp, err = root.Get(mapURL(string(spec)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("reduce: %d %s", resp.StatusCode, b)
	}
	// No extent has that ID: the reduce reports the reference as
	// unresolved (a reference without a bucket past every position).
	out, err := curator.ReadMapStream(resp.Body, dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Records) != 2 || out.Records[0].ID != dst.Lo+5 {
		t.Fatalf("reduce output %+v, want the one unresolved reference and what was sent onward", out.Records)
	}
	if n.shuffle.Shuffles() != 0 {
		t.Fatal("the reduce left its shuffle behind")
	}
	// The node's own metrics count the partition it reduced, and none
	// in progress once the stream has ended.
	mresp, err := root.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	for _, want := range []string{`terrace_curator_map_partitions_total{outcome="ok"} 1`, "terrace_curator_map_partitions_active 0", "terrace_curator_shuffles_held 0"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
