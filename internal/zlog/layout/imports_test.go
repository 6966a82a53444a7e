package layout

import (
	"testing"

	"github.com/terrace-storage/terrace/internal/puritytest"
)

// The layout decisions are pure: nothing outside the standard library
// (not even this module), no I/O, no clock.
func TestImportsOnlyStdlib(t *testing.T) {
	puritytest.Check(t, puritytest.Rules{Name: "layout"})
}
