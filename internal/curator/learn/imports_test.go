package learn

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// The learner is pure: it may import only model and standard-library
// packages that do no I/O, and reads no clock.
func TestImportsArePure(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "learn", Allowed: []string{"internal/model"}})
}
