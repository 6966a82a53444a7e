#!/usr/bin/env bash
# S3 smoke test with real third-party clients against a running Terrace.
#
#   scripts/s3-smoke.sh ENDPOINT        e.g. scripts/s3-smoke.sh http://127.0.0.1:9000
#
# Needs: aws (Debian awscli), rclone (Debian), python3 with boto3 (PyPI), curl.
# Credentials: TERRACE_ROOT_USER / TERRACE_ROOT_PASSWORD, else
# AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, else terrace / terrace-secret
# (the server's defaults). Region: TERRACE_REGION (us-east-1).
#
# Knobs: SMOKE_FILES (500 files in the tree), SMOKE_MAX_BYTES (20 MiB largest
# file), SMOKE_MP_MIB (100 MiB boto3 multipart object), SMOKE_WORKDIR (a temp
# dir, removed at the end unless SMOKE_KEEP=1), SMOKE_SKIP (space-separated
# client names to skip: aws rclone boto3 — for local runs only).
#
# Checks: aws s3 sync of the generated tree up and back is byte-identical;
# rclone check finds no differences, and rclone's own upload and download
# round-trip; boto3 multipart upload round-trips (scripts/s3_smoke_boto3.py);
# a presigned GET works with curl; a wrong secret gets 403; listing with a
# delimiter matches the local tree. Prints "N passed, M failed" and exits
# non-zero if anything failed.
set -uo pipefail

if [[ $# -ne 1 ]]; then
	echo "usage: $0 ENDPOINT" >&2
	exit 2
fi
ENDPOINT=${1%/}
HERE=$(cd "$(dirname "$0")" && pwd)
export AWS_ACCESS_KEY_ID=${TERRACE_ROOT_USER:-${AWS_ACCESS_KEY_ID:-terrace}}
export AWS_SECRET_ACCESS_KEY=${TERRACE_ROOT_PASSWORD:-${AWS_SECRET_ACCESS_KEY:-terrace-secret}}
export AWS_DEFAULT_REGION=${TERRACE_REGION:-us-east-1}
export AWS_REGION=$AWS_DEFAULT_REGION
unset AWS_PROFILE AWS_SESSION_TOKEN
FILES=${SMOKE_FILES:-500}
MAX_BYTES=${SMOKE_MAX_BYTES:-$((20 << 20))}
export SMOKE_MP_MIB=${SMOKE_MP_MIB:-100}
SKIP=" ${SMOKE_SKIP:-} "
WORK=${SMOKE_WORKDIR:-$(mktemp -d -t terrace-s3-smoke.XXXXXX)}
mkdir -p "$WORK"
BUCKET=terrace-smoke-$(date +%s)-$$

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
# check NAME CMD...: runs CMD, counts it; its output is shown on failure.
check() {
	local name=$1 out
	shift
	if out=$("$@" 2>&1); then
		pass "$name"
	else
		fail "$name"
		printf '%s\n' "$out" | tail -n 25 | sed 's/^/    /'
	fi
}
skipped() { [[ $SKIP == *" $1 "* ]]; }

cleanup() {
	aws s3 rb "s3://$BUCKET" --force >/dev/null 2>&1 || true
	if [[ ${SMOKE_KEEP:-0} != 1 ]]; then
		rm -rf "$WORK"
	fi
}
trap cleanup EXIT

# aws CLI: path-style addressing against a custom endpoint, SigV4 presigned
# URLs (aws CLI v1 presigns with SigV2 otherwise), no retries (a retried
# failure would hide the first answer).
export AWS_CONFIG_FILE=$WORK/aws-config
cat >"$AWS_CONFIG_FILE" <<EOF
[default]
region = $AWS_DEFAULT_REGION
max_attempts = 1
s3 =
    addressing_style = path
    signature_version = s3v4
EOF
awsc() { aws --endpoint-url "$ENDPOINT" "$@"; }

# rclone: a remote named "terrace" configured from the environment.
export RCLONE_CONFIG=$WORK/rclone.conf
: >"$RCLONE_CONFIG"
export RCLONE_CONFIG_TERRACE_TYPE=s3
export RCLONE_CONFIG_TERRACE_PROVIDER=Other
export RCLONE_CONFIG_TERRACE_ENDPOINT=$ENDPOINT
export RCLONE_CONFIG_TERRACE_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
export RCLONE_CONFIG_TERRACE_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
export RCLONE_CONFIG_TERRACE_REGION=$AWS_DEFAULT_REGION
export RCLONE_CONFIG_TERRACE_FORCE_PATH_STYLE=true
# rclone's AWS SDK refuses AWS_CA_BUNDLE with rclone's own HTTP transport;
# give rclone a CA with RCLONE_CA_CERT instead if the endpoint needs one.
rcl() { env -u AWS_CA_BUNDLE rclone "$@"; }

for tool in aws rclone python3 curl; do
	case $tool in
	aws) skipped aws && continue ;;
	rclone) skipped rclone && continue ;;
	python3) skipped boto3 && continue ;;
	esac
	if ! command -v "$tool" >/dev/null; then
		fail "tool $tool is installed"
	fi
done

# The tree: FILES files in nested directories, sizes from 1 byte to
# MAX_BYTES (both ends always present), skewed towards small files as real
# trees are; names with spaces and non-ASCII characters included.
gen_tree() {
	python3 - "$1" "$FILES" "$MAX_BYTES" <<'EOF'
import math, os, random, sys
root, n, top = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(20240601)
dirs = ["", "a", "a/b", "a/b/c", "docs", "docs/img", "space dir", "ünïcode", "deep/1/2/3/4"]
for i in range(n):
    if i == 0:
        size = 1
    elif i == 1:
        size = top
    else:
        size = max(1, int(math.exp(math.log(top) * rng.random() ** 2)))
    d = os.path.join(root, dirs[i % len(dirs)])
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "file-%03d.bin" % i), "wb") as f:
        left = size
        while left:
            chunk = min(left, 1 << 20)
            f.write(rng.randbytes(chunk))
            left -= chunk
EOF
}

TREE=$WORK/tree
echo "generating $FILES files (1 B .. $MAX_BYTES B) in $TREE"
rm -rf "$TREE"
gen_tree "$TREE"
echo "tree: $(du -sh "$TREE" | cut -f1), $(find "$TREE" -type f | wc -l) files"

if ! awsc s3 mb "s3://$BUCKET" >/dev/null 2>"$WORK/mb.err"; then
	fail "create bucket $BUCKET"
	sed 's/^/    /' "$WORK/mb.err"
	echo "$passed passed, $failed failed"
	exit 1
fi
pass "create bucket $BUCKET"

# --- aws s3 sync up and back ---------------------------------------------
if ! skipped aws; then
	check "aws s3 sync up" awsc s3 sync --no-progress --only-show-errors "$TREE" "s3://$BUCKET/tree/"
	rm -rf "$WORK/back-aws"
	check "aws s3 sync down" awsc s3 sync --no-progress --only-show-errors "s3://$BUCKET/tree/" "$WORK/back-aws"
	check "aws round trip is byte-identical" diff -r "$TREE" "$WORK/back-aws"
	check "aws s3 sync again uploads nothing" bash -c \
		"out=\$(aws --endpoint-url '$ENDPOINT' s3 sync --no-progress '$TREE' 's3://$BUCKET/tree/') && test -z \"\$out\" || { echo \"\$out\"; false; }"

	# Listing with a delimiter matches the local tree at several levels.
	list_matches() {
		local prefix=$1 dir=$2
		python3 - "$ENDPOINT" "$BUCKET" "$prefix" "$dir" <<'EOF'
import json, os, subprocess, sys
endpoint, bucket, prefix, d = sys.argv[1:]
out = subprocess.run(["aws", "--endpoint-url", endpoint, "s3api", "list-objects-v2", "--bucket", bucket,
                      "--prefix", prefix, "--delimiter", "/", "--output", "json"],
                     check=True, capture_output=True, text=True).stdout
res = json.loads(out) if out.strip() else {}
got_keys = sorted(o["Key"] for o in res.get("Contents", []))
got_prefixes = sorted(p["Prefix"] for p in res.get("CommonPrefixes", []))
want_keys = sorted(prefix + e.name for e in os.scandir(d) if e.is_file())
want_prefixes = sorted(prefix + e.name + "/" for e in os.scandir(d) if e.is_dir())
if got_keys != want_keys or got_prefixes != want_prefixes:
    print("prefix %r:\n got keys %s\n     prefixes %s\nwant keys %s\n     prefixes %s" % (
        prefix, got_keys[:10], got_prefixes, want_keys[:10], want_prefixes))
    sys.exit(1)
EOF
	}
	check "delimiter listing matches the tree (top)" list_matches "tree/" "$TREE"
	check "delimiter listing matches the tree (a/)" list_matches "tree/a/" "$TREE/a"
	check "delimiter listing matches the tree (a/b/)" list_matches "tree/a/b/" "$TREE/a/b"
	check "delimiter listing matches the tree (ünïcode/)" list_matches "tree/ünïcode/" "$TREE/ünïcode"
	check "delimiter listing matches the tree (space dir/)" list_matches "tree/space dir/" "$TREE/space dir"

	# Presigned GET with curl (the 20 MiB file).
	presigned_get() {
		local url
		url=$(awsc s3 presign "s3://$BUCKET/tree/a/file-001.bin" --expires-in 300) || return 1
		curl -fsS -o "$WORK/presigned.out" "$url" || return 1
		cmp "$WORK/presigned.out" "$TREE/a/file-001.bin"
	}
	check "presigned GET with curl" presigned_get

	# A wrong secret gets 403 (aws CLI and a raw curl of a tampered URL).
	wrong_secret() {
		local out
		if out=$(AWS_SECRET_ACCESS_KEY=not-the-secret aws --endpoint-url "$ENDPOINT" s3api list-objects-v2 --bucket "$BUCKET" 2>&1); then
			echo "listing with a wrong secret succeeded"
			return 1
		fi
		grep -q 'SignatureDoesNotMatch\|403' <<<"$out" || { echo "$out"; return 1; }
		url=$(AWS_SECRET_ACCESS_KEY=not-the-secret aws --endpoint-url "$ENDPOINT" s3 presign "s3://$BUCKET/tree/a/file-001.bin") || return 1
		code=$(curl -s -o /dev/null -w '%{http_code}' "$url")
		[[ $code == 403 ]] || { echo "presigned URL with a wrong secret: HTTP $code"; return 1; }
		code=$(curl -s -o /dev/null -w '%{http_code}' "$ENDPOINT/$BUCKET/tree/a/file-001.bin")
		[[ $code == 403 ]] || { echo "anonymous GET: HTTP $code"; return 1; }
	}
	check "wrong secret gets 403" wrong_secret
fi

# --- rclone ------------------------------------------------------------------
if ! skipped rclone; then
	# Against what aws uploaded: sizes and, where S3 has them, MD5s.
	if ! skipped aws; then
		check "rclone check (aws upload) reports no differences" rcl check "$TREE" "terrace:$BUCKET/tree"
	fi
	check "rclone sync up" rcl sync --transfers 4 "$TREE" "terrace:$BUCKET/rclone"
	check "rclone check reports no differences" rcl check "$TREE" "terrace:$BUCKET/rclone"
	check "rclone check --download reports no differences" rcl check --download "$TREE" "terrace:$BUCKET/rclone"
	rm -rf "$WORK/back-rclone"
	check "rclone copy down" rcl copy --transfers 4 "terrace:$BUCKET/rclone" "$WORK/back-rclone"
	check "rclone round trip is byte-identical" diff -r "$TREE" "$WORK/back-rclone"
fi

# --- boto3 ---------------------------------------------------------------------
if ! skipped boto3; then
	# Free the tree's disk before the big object.
	rm -rf "$WORK/back-aws" "$WORK/back-rclone"
	python3 "$HERE/s3_smoke_boto3.py" "$ENDPOINT" "$BUCKET" "$WORK" >"$WORK/boto3.log" 2>&1
	rc=$?
	reported=0
	while IFS= read -r line; do
		case $line in
		PASS*) pass "${line#PASS }" ;;
		FAIL*) fail "${line#FAIL }"; reported=1 ;;
		*) echo "    $line" ;;
		esac
	done <"$WORK/boto3.log"
	if [[ $rc -ne 0 && $reported -eq 0 ]]; then
		fail "boto3 script ran (exit $rc)"
	fi
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
