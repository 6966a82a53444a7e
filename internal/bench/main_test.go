package bench

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/bench/benchtest"
)

// testdata is absolute: the posix backend of the in-process gateway changes
// the working directory when it starts.
var testdata string

func TestMain(m *testing.M) {
	benchtest.MaybeRunFakeTerrace()
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	testdata = filepath.Join(wd, "testdata")
	code := m.Run()
	benchtest.Cleanup()
	os.Exit(code)
}
