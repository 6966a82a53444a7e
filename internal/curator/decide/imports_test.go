package decide

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// The decide step is pure: it may import only model, placement (itself
// pure) and standard-library packages that do no I/O.
func TestImportsArePure(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "decide", Allowed: []string{"internal/model", "internal/placement"}})
}
