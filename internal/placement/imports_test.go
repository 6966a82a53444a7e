package placement

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// Placement is pure decision code: a snapshot and a seeded RNG in, a
// decision out; only model and standard-library packages that do no I/O.
func TestImportsArePure(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "placement", Allowed: []string{"internal/model"}})
}
