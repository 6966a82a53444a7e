package actuate

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayering holds the layering the actuator made possible: one package
// moves data; the replica RPC (cluster) sits below the object layer; the
// Curator decides without touching replica I/O, extents or devices.
func TestLayering(t *testing.T) {
	forbidden := map[string][]string{
		"internal/cluster": {"internal/object", "internal/extent", "internal/device", "internal/curator", "internal/actuate"},
		"internal/curator": {"internal/extent", "internal/device", "internal/cluster"},
		"internal/actuate": {"internal/extent", "internal/device", "internal/cluster", "internal/curator\x00"},
		"internal/replica": {"internal/object", "internal/meta", "internal/cluster"},
		// The gateway reaches records only through the object layer.
		"internal/s3": {"internal/meta\x00", "internal/extent", "internal/replica", "internal/device", "internal/cluster"},
	}
	for pkg, bad := range forbidden {
		out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, "github.com/terrace-storage/terrace/"+pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", pkg, err)
		}
		for _, imp := range strings.Split(string(out), "\n") {
			for _, b := range bad {
				exact := strings.HasSuffix(b, "\x00")
				b = strings.TrimSuffix(b, "\x00")
				full := "github.com/terrace-storage/terrace/" + b
				if imp == full || (!exact && strings.HasPrefix(imp, full+"/")) {
					t.Errorf("%s imports %s", pkg, imp)
				}
			}
		}
	}
}
