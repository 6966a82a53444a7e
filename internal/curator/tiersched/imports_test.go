package tiersched

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// A scheduler is pure: it may import only decide, learn, model and
// standard-library packages that do no I/O, and reads no clock.
func TestImportsArePure(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "tiersched",
		Allowed: []string{"internal/model", "internal/curator/decide", "internal/curator/learn"}})
}
