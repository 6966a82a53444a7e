package server

import (
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"testing"
)

func TestApplyRuntimeSetsTheCollector(t *testing.T) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		t.Skip("GOGC/GOMEMLIMIT set in the environment: they win by design")
	}
	prevPct := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	defer func() {
		debug.SetGCPercent(prevPct)
		debug.SetMemoryLimit(prevLimit)
	}()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	ApplyRuntime(Config{}, log)
	if got := debug.SetGCPercent(100); got != DefaultGCPercent {
		t.Errorf("default gc percent %d, want %d", got, DefaultGCPercent)
	}
	ApplyRuntime(Config{GCPercent: 300, MemoryLimitBytes: 512 << 20}, log)
	if got := debug.SetGCPercent(100); got != 300 {
		t.Errorf("gc percent %d, want 300", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Errorf("memory limit %d, want 512 MiB", got)
	}

	t.Setenv("GOGC", "50") // the environment wins
	ApplyRuntime(Config{GCPercent: 400}, log)
	if got := debug.SetGCPercent(100); got == 400 {
		t.Errorf("GOGC in the environment was overridden by the configuration")
	}
}
