#!/usr/bin/env bash
# Runs the Go benchmarks of the hot paths and writes a dated summary.
set -euo pipefail
out=bench-out/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
{
  echo "# go test -bench, $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD)"
  echo "# $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -r)"
  go test -run '^$' -bench . -benchmem -count 1 ./internal/... 2>&1
} | tee "$out/summary.txt"
echo "wrote $out/summary.txt"
