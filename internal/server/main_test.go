package server

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fuzzNode.n != nil {
		fuzzNode.n.Close()
	}
	if fuzzNode.root != "" {
		os.RemoveAll(fuzzNode.root)
	}
	os.Exit(code)
}
