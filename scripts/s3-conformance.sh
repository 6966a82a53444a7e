#!/usr/bin/env bash
# S3 conformance set: starts a throw-away single-node Terrace (lifecycle day
# shortened to 2 s), creates users with the CLI, runs the boto3 and
# aws-sdk-go-v2 checks, and compares every outcome with
# scripts/s3-conformance.expected. Any difference (a check whose outcome
# changed, a check missing from the list, a listed check that did not run)
# fails.
#
#   scripts/s3-conformance.sh [BIN]          (make conformance)
#   S3_CONFORMANCE_UPDATE=1 scripts/s3-conformance.sh   rewrites the expected list
set -euo pipefail
BIN=${1:-bin/terrace}
here=$(cd "$(dirname "$0")" && pwd)
expected="$here/s3-conformance.expected"
dir=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
S3=127.0.0.1:$(port); ADMIN=127.0.0.1:$(port)
cat >"$dir/terrace.yaml" <<EOF
data_dir: $dir
s3_address: $S3
admin_address: $ADMIN
devices: ["ssd:$dir/ssd0:2GiB", "ssd:$dir/ssd1:2GiB", "hdd:$dir/hdd0:4GiB", "hdd:$dir/hdd1:4GiB"]
default_vector: ssd=1
probe_bytes: 1048576
lifecycle:
  day: 2s
  interval: 1s
EOF
"$BIN" server --config "$dir/terrace.yaml" >"$dir/server.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
for _ in $(seq 1 200); do
  curl -fsS "http://$S3/-/health" >/dev/null 2>&1 && break
  sleep 0.1
done
export AWS_ACCESS_KEY_ID=terrace AWS_SECRET_ACCESS_KEY=terrace-secret AWS_DEFAULT_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true

status=0
python3 "$here/s3_conformance.py" "http://$S3" "http://$ADMIN" "$BIN" >"$dir/boto3.out" || status=$?
go run ./test/s3conformance -endpoint "http://$S3" -admin "http://$ADMIN" -bin "$BIN" >"$dir/go.out" || status=$?
sort "$dir/boto3.out" "$dir/go.out" >"$dir/actual"
if [ "${S3_CONFORMANCE_UPDATE:-}" = 1 ]; then
  { grep '^#' "$expected" 2>/dev/null || true; cat "$dir/actual"; } >"$dir/new" && mv "$dir/new" "$expected"
  echo "s3-conformance: rewrote $expected"
  exit 0
fi
grep -v '^#' "$expected" | grep -v '^$' | sort >"$dir/want"
if diff -u "$dir/want" "$dir/actual" >"$dir/diff"; then
  echo "s3-conformance: $(wc -l <"$dir/actual") checks, all as expected"
else
  echo "s3-conformance: outcomes differ from $expected (- expected, + actual):"
  grep '^[-+][^-+]' "$dir/diff" || true
  status=1
fi
if [ $status -ne 0 ]; then
  echo "--- server log (tail) ---"; tail -30 "$dir/server.log"
fi
exit $status
