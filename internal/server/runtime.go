package server

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/terrace-storage/terrace/internal/meta"
)

// DefaultGCPercent is the garbage collector's target when neither the
// configuration nor GOGC sets one. A node's live heap is small (tens of
// MiB: records in flight, caches) and its allocation rate high (every
// request decodes records and builds responses), so Go's default of 100
// collects several times a second and took 15–20 % of a busy node's CPU
// in profiles; 200 halves the collections for a few tens of MiB more
// heap. memory_limit_bytes (or GOMEMLIMIT) bounds the heap when a burst
// (a Curator scan) would otherwise double it.
const DefaultGCPercent = 200

// ApplyRuntime sets the process's garbage collector from the
// configuration. The environment wins (GOGC, GOMEMLIMIT are read by the Go
// runtime at start), so an operator can still override either without
// editing the file. Call it with a configuration Open accepted.
func ApplyRuntime(c Config, log *slog.Logger) {
	if os.Getenv("GOGC") == "" {
		pct := c.GCPercent
		if pct == 0 {
			pct = DefaultGCPercent
		}
		debug.SetGCPercent(pct)
		log.Debug("garbage collector target", "gc_percent", pct)
	}
	if os.Getenv("GOMEMLIMIT") == "" && c.MemoryLimitBytes > 0 {
		debug.SetMemoryLimit(c.MemoryLimitBytes)
		log.Info("soft memory limit", "bytes", c.MemoryLimitBytes)
	}
	meta.SetBinaryRecords(c.MetaRecordFormat != "json")
	if c.MetaRecordFormat == "json" {
		log.Info("egroup, access, extent, object and version records are written as JSON (meta_record_format: json)")
	}
}

func (c *Config) validateRuntime() error {
	if c.GCPercent != 0 && (c.GCPercent < 25 || c.GCPercent > 1000) {
		return fmt.Errorf("server: gc_percent %d outside [25, 1000] (0: the default, %d)", c.GCPercent, DefaultGCPercent)
	}
	if c.MemoryLimitBytes != 0 && c.MemoryLimitBytes < 64<<20 {
		return fmt.Errorf("server: memory_limit_bytes %d below 64 MiB", c.MemoryLimitBytes)
	}
	return nil
}
