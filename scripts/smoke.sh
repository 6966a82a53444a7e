#!/usr/bin/env bash
# Starts a throw-away single-node Terrace and runs the S3 smoke test with
# real third-party clients (aws, rclone, boto3) against it.
set -euo pipefail
BIN=${1:-bin/terrace}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
S3=127.0.0.1:$(port); ADMIN=127.0.0.1:$(port)
"$BIN" server --data-dir "$dir" --s3-address "$S3" --admin-address "$ADMIN" \
  --device "ssd:$dir/ssd0:4GiB" --device "hdd:$dir/hdd0:8GiB" --device "hdd:$dir/hdd1:8GiB" \
  --default-vector ssd=1,hdd=1 >"$dir/server.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
# The admin API answers unsigned requests with 401: any HTTP answer means up.
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$ADMIN/v1/status")" != 000 ] && break
  sleep 0.1
done
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$ADMIN/v1/status")
if [ "$code" != 401 ]; then
  echo "smoke: an unsigned admin request got HTTP $code, want 401"; exit 1
fi
echo "smoke: unsigned admin request refused (401)"
export TERRACE_S3_ENDPOINT="http://$S3" TERRACE_ENDPOINT="http://$ADMIN" TERRACE_BIN="$BIN"
export AWS_ACCESS_KEY_ID=terrace AWS_SECRET_ACCESS_KEY=terrace-secret AWS_DEFAULT_REGION=us-east-1
if [ ! -x "$here/s3-smoke.sh" ]; then
  echo "smoke: scripts/s3-smoke.sh missing"; exit 1
fi
status=0
"$here/s3-smoke.sh" "http://$S3" || status=$?
if [ $status -ne 0 ]; then
  echo "--- server log (tail) ---"; tail -50 "$dir/server.log"
fi
exit $status
