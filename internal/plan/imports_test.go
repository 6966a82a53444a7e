package plan

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// The planner is pure decision code: it may import only model and
// standard-library packages that do no I/O, read no clock and keep no
// shared state (not even "time" or a logger).
func TestImportsArePure(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "plan", Allowed: []string{"internal/model"},
		Forbidden: []string{"log", "log/slog"}, NoTime: true})
}
