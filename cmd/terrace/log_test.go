package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/server"
)

// `terrace log read --fill` fills a hole with the POST (the admin API
// refuses a GET that fills) and then reads what the position holds.
func TestLogReadFillUsesThePost(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, ProbeBytes: 64 << 10, DefaultVector: "any=1",
		Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"}, Curator: server.CuratorConfig{Disabled: true}}
	n, err := server.Open(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	for i := 0; ; i++ { // the log service needs a moment
		req, _ := http.NewRequest("PUT", s.URL+"/v1/logs/cli?vector=any=1", nil)
		resp, err := root.Do(req)
		var body []byte
		if err == nil {
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				break
			}
		}
		if i == 50 {
			t.Fatalf("create log: %v %s", err, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	run := func(args ...string) (string, error) {
		cmd := newRootCmd()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(append([]string{"--endpoint", s.URL, "--access-key", n.Config.RootUser, "--secret-key", n.Config.RootPassword}, args...))
		err := cmd.Execute()
		return out.String(), err
	}
	if _, err := run("log", "read", "cli", "3"); err == nil || !strings.Contains(err.Error(), "not written") {
		t.Fatalf("read of an unwritten position: %v", err)
	}
	if _, err := run("log", "read", "cli", "3", "--fill"); err == nil || !strings.Contains(err.Error(), "filled") {
		t.Fatalf("read --fill of a hole: %v, want it filled", err)
	}
	if _, err := run("log", "read", "cli", "3"); err == nil || !strings.Contains(err.Error(), "filled") {
		t.Errorf("position 3 after read --fill: %v, want filled", err)
	}
}
