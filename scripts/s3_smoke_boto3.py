#!/usr/bin/env python3
"""boto3 half of the S3 smoke test (called by scripts/s3-smoke.sh).

Usage: s3_smoke_boto3.py ENDPOINT BUCKET WORKDIR

Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (the shell
script sets them from TERRACE_ROOT_USER / TERRACE_ROOT_PASSWORD). Each
check prints "PASS name" or "FAIL name: reason"; the shell script counts
them. The exit status is the number of failed checks (capped at 100).
"""

import hashlib
import io
import os
import sys
import urllib.request

import boto3
import botocore
from boto3.s3.transfer import TransferConfig
from botocore.config import Config

MIB = 1 << 20


def client(endpoint, secret=None):
    cfg = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1},
                 signature_version="s3v4")
    return boto3.client(
        "s3", endpoint_url=endpoint,
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secret or os.environ["AWS_SECRET_ACCESS_KEY"],
        region_name=os.environ.get("AWS_DEFAULT_REGION", "us-east-1"),
        config=cfg)


def multipart_etag(path, part):
    """S3's multipart ETag of a file uploaded in parts of `part` bytes."""
    digests = []
    with open(path, "rb") as f:
        while True:
            chunk = f.read(part)
            if not chunk:
                break
            digests.append(hashlib.md5(chunk).digest())
    return '"%s-%d"' % (hashlib.md5(b"".join(digests)).hexdigest(), len(digests))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    endpoint, bucket, workdir = sys.argv[1:4]
    size_mib = int(os.environ.get("SMOKE_MP_MIB", "100"))
    part = 16 * MIB
    s3 = client(endpoint)
    failed = 0

    def check(name, fn):
        nonlocal failed
        try:
            fn()
            print("PASS boto3: " + name, flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported
            failed += 1
            print("FAIL boto3: %s: %s: %s" % (name, type(e).__name__, e), flush=True)

    src = os.path.join(workdir, "boto3-multipart.bin")
    dst = os.path.join(workdir, "boto3-multipart.out")
    key = "boto3/multipart-%dMiB.bin" % size_mib
    with open(src, "wb") as f:
        for i in range(size_mib):
            f.write(os.urandom(MIB))

    def multipart_roundtrip():
        cfg = TransferConfig(multipart_threshold=8 * MIB, multipart_chunksize=part, max_concurrency=4)
        s3.upload_file(src, bucket, key, Config=cfg)
        head = s3.head_object(Bucket=bucket, Key=key)
        if head["ContentLength"] != size_mib * MIB:
            raise AssertionError("size %d, want %d" % (head["ContentLength"], size_mib * MIB))
        want = multipart_etag(src, part)
        if head["ETag"] != want:
            raise AssertionError("etag %s, want md5-of-md5s %s" % (head["ETag"], want))
        s3.download_file(bucket, key, dst, Config=cfg)
        if sha256_file(src) != sha256_file(dst):
            raise AssertionError("downloaded bytes differ")

    def ranged_get():
        # Across the first part boundary (or the middle of a one-part object).
        at = part if size_mib * MIB > part else size_mib * MIB // 2
        r = s3.get_object(Bucket=bucket, Key=key, Range="bytes=%d-%d" % (at - 10, at + 9))
        got = r["Body"].read()
        with open(src, "rb") as f:
            f.seek(at - 10)
            want = f.read(20)
        if got != want or r["ContentRange"] != "bytes %d-%d/%d" % (at - 10, at + 9, size_mib * MIB):
            raise AssertionError("range around byte %d differs" % at)

    def presigned_get():
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=300)
        h = hashlib.sha256()
        with urllib.request.urlopen(url) as resp:
            for chunk in iter(lambda: resp.read(MIB), b""):
                h.update(chunk)
        if h.hexdigest() != sha256_file(src):
            raise AssertionError("presigned download differs")

    def wrong_secret():
        bad = client(endpoint, secret="definitely-not-the-secret")
        try:
            bad.put_object(Bucket=bucket, Key="boto3/forbidden", Body=b"x")
        except botocore.exceptions.ClientError as e:
            status = e.response["ResponseMetadata"]["HTTPStatusCode"]
            if status != 403:
                raise AssertionError("status %d, want 403" % status)
            return
        raise AssertionError("write with a wrong secret succeeded")

    def small_objects_and_metadata():
        s3.put_object(Bucket=bucket, Key="boto3/meta", Body=io.BytesIO(b"hello"),
                      ContentType="text/plain", Metadata={"color": "blue"}, StorageClass="REDUCED_REDUNDANCY")
        h = s3.head_object(Bucket=bucket, Key="boto3/meta")
        if h["Metadata"].get("color") != "blue" or h["ContentType"] != "text/plain":
            raise AssertionError("metadata %r type %r" % (h["Metadata"], h["ContentType"]))
        if h.get("StorageClass") != "REDUCED_REDUNDANCY":
            raise AssertionError("storage class %r" % h.get("StorageClass"))
        if h["ETag"] != '"%s"' % hashlib.md5(b"hello").hexdigest():
            raise AssertionError("etag %s" % h["ETag"])

    def abort_and_errors():
        up = s3.create_multipart_upload(Bucket=bucket, Key="boto3/aborted")
        s3.upload_part(Bucket=bucket, Key="boto3/aborted", UploadId=up["UploadId"], PartNumber=1, Body=b"x" * 100)
        s3.abort_multipart_upload(Bucket=bucket, Key="boto3/aborted", UploadId=up["UploadId"])
        try:
            s3.list_parts(Bucket=bucket, Key="boto3/aborted", UploadId=up["UploadId"])
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] != "NoSuchUpload":
                raise
        else:
            raise AssertionError("aborted upload still listed")
        try:
            s3.get_object(Bucket=bucket, Key="boto3/does-not-exist")
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] != "NoSuchKey":
                raise
        else:
            raise AssertionError("missing key returned")

    check("multipart upload of %d MiB round-trips with an md5-of-md5s ETag" % size_mib, multipart_roundtrip)
    check("ranged GET across a part boundary", ranged_get)
    check("presigned GET", presigned_get)
    check("wrong secret is refused with 403", wrong_secret)
    check("metadata, content type, storage class, ETag", small_objects_and_metadata)
    check("abort, NoSuchUpload, NoSuchKey", abort_and_errors)
    for p in (src, dst):
        if os.path.exists(p):
            os.remove(p)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
