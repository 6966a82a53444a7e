package main

import (
	"strings"
	"testing"

	"github.com/terrace-storage/terrace/internal/server"
)

// The start-up banner goes to stdout (journald, docker logs): it shows the
// root secret only when that is the published demo default, and says so.
func TestBannerShowsOnlyTheDemoPassword(t *testing.T) {
	demo := server.Config{}
	demo.EnsureDefaults()
	var b strings.Builder
	printBanner(&b, demo, "http://127.0.0.1:9001/console/")
	if out := b.String(); !strings.Contains(out, server.DefaultRootPassword) || !strings.Contains(out, "published demo default") {
		t.Errorf("demo banner does not show the demo password as such:\n%s", out)
	}

	own := server.Config{RootUser: "admin", RootPassword: "a-long-random-secret"}
	own.EnsureDefaults()
	b.Reset()
	printBanner(&b, own, "http://127.0.0.1:9001/console/")
	out := b.String()
	if strings.Contains(out, own.RootPassword) {
		t.Errorf("banner prints the configured root password:\n%s", out)
	}
	if !strings.Contains(out, `"admin"`) || strings.Contains(out, "published demo default") {
		t.Errorf("banner for a configured password:\n%s", out)
	}
}
