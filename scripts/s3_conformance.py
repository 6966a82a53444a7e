#!/usr/bin/env python3
"""boto3 half of the S3 conformance set (run by scripts/s3-conformance.sh).

Usage: s3_conformance.py ENDPOINT ADMIN_ENDPOINT TERRACE_BIN

Three identities: root (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY), and two
users created through the CLI (`terrace user add NAME --json`), plus
anonymous HTTP. Every check prints one line, "boto3/NAME OUTCOME", where
OUTCOME is "ok", the S3 error code the server answered (or the HTTP status
when the answer has no body, e.g. HEAD), or "assert:..." when a successful
answer had the wrong content. scripts/s3-conformance.expected lists the
outcome every check must have; the shell script compares.
"""

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import boto3
import botocore
from botocore.config import Config

ENDPOINT, ADMIN, BIN = sys.argv[1:4]
REGION = "us-east-1"
MIB = 1 << 20
RUN = "%x" % int(time.time() * 1000)  # keeps bucket names unique per run


def client(ak, sk, **cfg):
    conf = Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, signature_version="s3v4", **cfg)
    return boto3.client("s3", endpoint_url=ENDPOINT, aws_access_key_id=ak, aws_secret_access_key=sk,
                        region_name=REGION, config=conf)


def add_user(name):
    out = subprocess.run([BIN, "--endpoint", ADMIN, "user", "add", name, "--json"], check=True,
                         capture_output=True, text=True).stdout
    creds = json.loads(out)
    assert set(creds) == {"name", "access_key", "secret_key"}, creds
    return creds


root = client(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"])
alice_creds = add_user("alice-" + RUN)
bob_creds = add_user("bob-" + RUN)
ALICE, BOB = alice_creds["name"], bob_creds["name"]
alice = client(alice_creds["access_key"], alice_creds["secret_key"])
bob = client(bob_creds["access_key"], bob_creds["secret_key"])


def bucket(name):
    return ("%s-%s" % (name, RUN))[:63]


def anon(method, path, body=None):
    req = urllib.request.Request(ENDPOINT + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def outcome(fn):
    try:
        r = fn()
        return "ok" if r is None else str(r)
    except botocore.exceptions.ClientError as e:
        code = e.response.get("Error", {}).get("Code", "")
        return code or str(e.response["ResponseMetadata"]["HTTPStatusCode"])
    except AssertionError as e:
        return "assert:" + str(e).replace(" ", "_")[:100]
    except Exception as e:  # noqa: BLE001 - every failure is an outcome
        return "exception:%s:%s" % (type(e).__name__, str(e).replace(" ", "_")[:80])


def check(name, fn):
    print("boto3/%s %s" % (name, outcome(fn)), flush=True)


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


# ---------------------------------------------------------------- buckets
B = bucket("conf")
check("create-bucket", lambda: root.create_bucket(Bucket=B) and None)
check("create-bucket-again-owner", lambda: root.create_bucket(Bucket=B))
check("create-bucket-again-other-user", lambda: bob.create_bucket(Bucket=B))
for bad in ["foo..bar", "foo.-bar", "foo-.bar", "UPPER", "192.168.0.1"]:
    check("create-bucket-invalid-name " + bad, lambda bad=bad: root.create_bucket(Bucket=bad))
check("head-bucket", lambda: root.head_bucket(Bucket=B) and None)
check("head-bucket-missing", lambda: root.head_bucket(Bucket=bucket("missing")))
check("get-bucket-location", lambda: root.get_bucket_location(Bucket=B) and None)

# ---------------------------------------------------------------- objects
DATA = os.urandom(3 * MIB + 7)


def put_get():
    r = root.put_object(Bucket=B, Key="obj", Body=DATA, Metadata={"color": "blue"}, ContentType="text/x-test")
    expect(r["ETag"] == '"%s"' % hashlib.md5(DATA).hexdigest(), "etag")
    g = root.get_object(Bucket=B, Key="obj")
    expect(g["Body"].read() == DATA, "body")
    expect(g["Metadata"] == {"color": "blue"} and g["ContentType"] == "text/x-test", "metadata")


check("put-get", put_get)


def ranges():
    g = root.get_object(Bucket=B, Key="obj", Range="bytes=100-199")
    expect(g["Body"].read() == DATA[100:200] and g["ContentRange"] == "bytes 100-199/%d" % len(DATA), "range")
    g = root.get_object(Bucket=B, Key="obj", Range="bytes=-10")
    expect(g["Body"].read() == DATA[-10:], "suffix range")


check("get-range", ranges)
check("get-range-unsatisfiable", lambda: root.get_object(Bucket=B, Key="obj", Range="bytes=%d-" % len(DATA)))
check("get-missing-key", lambda: root.get_object(Bucket=B, Key="nope"))
check("head-missing-key", lambda: root.head_object(Bucket=B, Key="nope"))
check("get-part-number-past-end", lambda: root.get_object(Bucket=B, Key="obj", PartNumber=2))


def not_modified():
    etag = root.head_object(Bucket=B, Key="obj")["ETag"]
    try:
        root.get_object(Bucket=B, Key="obj", IfNoneMatch=etag)
    except botocore.exceptions.ClientError as e:
        h = e.response["ResponseMetadata"]["HTTPHeaders"]
        expect(e.response["ResponseMetadata"]["HTTPStatusCode"] == 304, "status")
        expect(h.get("etag") == etag, "304 without ETag")
        return "304-with-etag"
    raise AssertionError("no 304")


check("get-if-none-match", not_modified)
check("get-if-match-wrong", lambda: root.get_object(Bucket=B, Key="obj", IfMatch='"00000000000000000000000000000000"'))
check("put-if-none-match-star-existing", lambda: root.put_object(Bucket=B, Key="obj", Body=b"x", IfNoneMatch="*"))
check("put-if-none-match-star-new", lambda: root.put_object(Bucket=B, Key="new-once", Body=b"x", IfNoneMatch="*") and None)


def copy_replace():
    root.copy_object(Bucket=B, Key="copy", CopySource={"Bucket": B, "Key": "obj"}, MetadataDirective="REPLACE",
                     Metadata={"shape": "round"})
    h = root.head_object(Bucket=B, Key="copy")
    expect(h["Metadata"] == {"shape": "round"} and h["ContentLength"] == len(DATA), "copy")


check("copy-object-replace", copy_replace)
check("copy-object-onto-itself", lambda: root.copy_object(Bucket=B, Key="obj", CopySource={"Bucket": B, "Key": "obj"}))


def delete_objects():
    r = root.delete_objects(Bucket=B, Delete={"Objects": [{"Key": "copy"}, {"Key": "never-existed"}]})
    expect(len(r.get("Deleted", [])) == 2, "deleted")


check("delete-objects", delete_objects)
check("delete-bucket-not-empty", lambda: root.delete_bucket(Bucket=B))

# ---------------------------------------------------------------- listing
L = bucket("conf-list")
root.create_bucket(Bucket=L)
for k in ["foo+1/bar", "foo/bar/xyzzy", "quux ab/thud", "asdf+b", "a", "b", "c"]:
    root.put_object(Bucket=L, Key=k, Body=b"x")


def list_v2_pages():
    keys, token = [], None
    while True:
        kw = {"Bucket": L, "MaxKeys": 2}
        if token:
            kw["ContinuationToken"] = token
        r = root.list_objects_v2(**kw)
        keys += [o["Key"] for o in r.get("Contents", [])]
        if not r["IsTruncated"]:
            break
        token = r["NextContinuationToken"]
    expect(keys == sorted(keys) and len(keys) == 7, "keys %s" % keys)


check("list-v2-pagination", list_v2_pages)


def list_v2_empty_token():
    r = root.list_objects_v2(Bucket=L, ContinuationToken="")
    expect(r.get("ContinuationToken") == "" and r["KeyCount"] == 7, "empty token")


check("list-v2-empty-continuation-token", list_v2_empty_token)


def list_encoding():
    # Asked for explicitly, the encoded names reach the caller (botocore
    # decodes only when it added EncodingType itself, as in every other
    # listing here).
    r = root.list_objects_v2(Bucket=L, Delimiter="/", EncodingType="url")
    prefixes = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
    expect(prefixes == ["foo%2B1/", "foo/", "quux%20ab/"] and r["EncodingType"] == "url", "prefixes %s" % prefixes)
    keys = [o["Key"] for o in root.list_objects_v2(Bucket=L, Prefix="quux ")["Contents"]]
    expect(keys == ["quux ab/thud"], "auto-decoded keys %s" % keys)


check("list-v2-encoding-url", list_encoding)


def list_v1_markers():
    r = root.list_objects(Bucket=L, MaxKeys=3, Marker="a")
    keys = [o["Key"] for o in r["Contents"]]
    expect(keys == ["asdf+b", "b", "c"] and r["IsTruncated"] and r["NextMarker"] == "c", "v1 %s" % keys)


check("list-v1-marker", list_v1_markers)
check("list-bad-encoding", lambda: root.list_objects_v2(Bucket=L, EncodingType="base64"))

# ---------------------------------------------------------------- multipart
M = bucket("conf-mp")
root.create_bucket(Bucket=M)
P1, P2 = os.urandom(5 * MIB), os.urandom(100)


def mp_complete_twice():
    up = root.create_multipart_upload(Bucket=M, Key="mp")["UploadId"]
    e1 = root.upload_part(Bucket=M, Key="mp", UploadId=up, PartNumber=1, Body=P1)["ETag"]
    e2 = root.upload_part(Bucket=M, Key="mp", UploadId=up, PartNumber=2, Body=P2)["ETag"]
    parts = {"Parts": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}]}
    a = root.complete_multipart_upload(Bucket=M, Key="mp", UploadId=up, MultipartUpload=parts)
    b = root.complete_multipart_upload(Bucket=M, Key="mp", UploadId=up, MultipartUpload=parts)
    want = '"%s-2"' % hashlib.md5(hashlib.md5(P1).digest() + hashlib.md5(P2).digest()).hexdigest()
    expect(a["ETag"] == want and b["ETag"] == want, "etags %s %s" % (a["ETag"], b["ETag"]))
    g = root.get_object(Bucket=M, Key="mp", PartNumber=2)
    expect(g["Body"].read() == P2 and g["PartsCount"] == 2, "part 2")


check("multipart-complete-and-retry", mp_complete_twice)


def mp_error(kind):
    up = root.create_multipart_upload(Bucket=M, Key="bad")["UploadId"]
    e1 = root.upload_part(Bucket=M, Key="bad", UploadId=up, PartNumber=1, Body=b"small")["ETag"]
    e2 = root.upload_part(Bucket=M, Key="bad", UploadId=up, PartNumber=2, Body=b"small")["ETag"]
    parts = {"order": [{"PartNumber": 2, "ETag": e2}, {"PartNumber": 1, "ETag": e1}],
             "small": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 2, "ETag": e2}],
             "missing": [{"PartNumber": 1, "ETag": e1}, {"PartNumber": 3, "ETag": e2}]}[kind]
    try:
        root.complete_multipart_upload(Bucket=M, Key="bad", UploadId=up, MultipartUpload={"Parts": parts})
    finally:
        root.abort_multipart_upload(Bucket=M, Key="bad", UploadId=up)


check("multipart-part-order", lambda: mp_error("order"))
check("multipart-entity-too-small", lambda: mp_error("small"))
check("multipart-missing-part", lambda: mp_error("missing"))
check("multipart-no-such-upload", lambda: root.upload_part(Bucket=M, Key="x", UploadId="nope", PartNumber=1, Body=b"x"))


def mp_list():
    up = root.create_multipart_upload(Bucket=M, Key="listed")["UploadId"]
    root.upload_part(Bucket=M, Key="listed", UploadId=up, PartNumber=1, Body=b"x")
    ups = [u["UploadId"] for u in root.list_multipart_uploads(Bucket=M).get("Uploads", [])]
    parts = root.list_parts(Bucket=M, Key="listed", UploadId=up)["Parts"]
    root.abort_multipart_upload(Bucket=M, Key="listed", UploadId=up)
    expect(up in ups and len(parts) == 1 and parts[0]["Size"] == 1, "listing")


check("multipart-list-uploads-and-parts", mp_list)

# ---------------------------------------------------------------- users, ACLs, policies
A = bucket("conf-alice")
check("user-create-bucket", lambda: alice.create_bucket(Bucket=A) and None)
alice.put_object(Bucket=A, Key="private", Body=b"alice's")
check("cross-user-get-denied", lambda: bob.get_object(Bucket=A, Key="private"))
check("cross-user-list-denied", lambda: bob.list_objects_v2(Bucket=A))
check("cross-user-put-denied", lambda: bob.put_object(Bucket=A, Key="x", Body=b"x"))
check("cross-user-delete-bucket-denied", lambda: bob.delete_bucket(Bucket=A))
check("anonymous-get-private", lambda: "status:%d" % anon("GET", "/%s/private" % A)[0])


def list_buckets_own():
    names = [b["Name"] for b in bob.list_buckets()["Buckets"]]
    expect(A not in names, "bob sees alice's bucket")
    r = alice.list_buckets()
    expect(A in [b["Name"] for b in r["Buckets"]] and r["Owner"]["ID"] == ALICE, "owner")


check("list-buckets-own-only", list_buckets_own)


def policy_grant():
    pol = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": [BOB]},
                                                  "Action": ["s3:GetObject"], "Resource": ["arn:aws:s3:::%s/*" % A]}]}
    alice.put_bucket_policy(Bucket=A, Policy=json.dumps(pol))
    expect(bob.get_object(Bucket=A, Key="private")["Body"].read() == b"alice's", "bob read")
    # The owner keeps access under a policy that does not name her.
    alice.put_object(Bucket=A, Key="still-mine", Body=b"x")


check("bucket-policy-grants-other-user", policy_grant)
check("bucket-policy-put-still-denied", lambda: bob.put_object(Bucket=A, Key="x", Body=b"x"))
check("bucket-policy-unknown-principal", lambda: alice.put_bucket_policy(Bucket=A, Policy=json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": ["nobody-" + RUN]},
                                             "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/*" % A}]})))

PUB = bucket("conf-public")
alice.create_bucket(Bucket=PUB, ObjectOwnership="ObjectWriter")
alice.put_object(Bucket=PUB, Key="page", Body=b"hello")
check("acl-on-enforced-bucket", lambda: alice.put_bucket_acl(Bucket=A, ACL="public-read"))
check("put-bucket-acl-public-read", lambda: alice.put_bucket_acl(Bucket=PUB, ACL="public-read") and None)
check("anonymous-get-public-read", lambda: "status:%d" % anon("GET", "/%s/page" % PUB)[0])
check("anonymous-put-public-read", lambda: "status:%d" % anon("PUT", "/%s/anon" % PUB, b"x")[0])


def bucket_acl_xml():
    acl = alice.get_bucket_acl(Bucket=PUB)
    expect(acl["Owner"].get("ID") == ALICE and acl["Owner"].get("DisplayName") == ALICE, "owner %s" % acl["Owner"])
    uris = [g["Grantee"].get("URI") for g in acl["Grants"]]
    expect("http://acs.amazonaws.com/groups/global/AllUsers" in uris, "grants %s" % acl["Grants"])


check("get-bucket-acl", bucket_acl_xml)


def object_acl():
    alice.put_object_acl(Bucket=PUB, Key="page", GrantRead='id="%s"' % BOB)
    acl = alice.get_object_acl(Bucket=PUB, Key="page")
    expect(acl["Owner"]["ID"] == ALICE and [g["Grantee"]["ID"] for g in acl["Grants"]] == [BOB], "acl %s" % acl)


check("put-get-object-acl", object_acl)
check("grant-unknown-user", lambda: alice.put_bucket_acl(Bucket=PUB, GrantRead='id="nobody-%s"' % RUN))


def presigned():
    url = alice.generate_presigned_url("get_object", Params={"Bucket": A, "Key": "private"}, ExpiresIn=60)
    with urllib.request.urlopen(url) as r:
        expect(r.read() == b"alice's", "presigned body")
    bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    return None if anon("GET", bad[len(ENDPOINT):])[0] == 403 else "tampered-presigned-accepted"


check("presigned-get", presigned)

# ---------------------------------------------------------------- encryption
E = bucket("conf-sse")
root.create_bucket(Bucket=E)
KEY = os.urandom(32)
KEY_B64 = base64.b64encode(KEY).decode()
KEY_MD5 = base64.b64encode(hashlib.md5(KEY).digest()).decode()
SSEC = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": KEY_B64, "SSECustomerKeyMD5": KEY_MD5}
OTHER = os.urandom(32)
SSEC_OTHER = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": base64.b64encode(OTHER).decode(),
              "SSECustomerKeyMD5": base64.b64encode(hashlib.md5(OTHER).digest()).decode()}


def sse_s3():
    r = root.put_object(Bucket=E, Key="s3", Body=DATA, ServerSideEncryption="AES256")
    expect(r["ServerSideEncryption"] == "AES256" and r["ETag"] == '"%s"' % hashlib.md5(DATA).hexdigest(), "put")
    g = root.get_object(Bucket=E, Key="s3", Range="bytes=70000-70099")
    expect(g["ServerSideEncryption"] == "AES256" and g["Body"].read() == DATA[70000:70100], "get")


check("sse-s3-put-get", sse_s3)


def sse_c():
    r = root.put_object(Bucket=E, Key="c", Body=DATA, **SSEC)
    expect(r["SSECustomerKeyMD5"] == KEY_MD5, "put md5")
    g = root.get_object(Bucket=E, Key="c", **SSEC)
    expect(g["Body"].read() == DATA and g["SSECustomerAlgorithm"] == "AES256", "get")


check("sse-c-put-get", sse_c)
check("sse-c-get-without-key", lambda: root.get_object(Bucket=E, Key="c"))
check("sse-c-get-wrong-key", lambda: root.get_object(Bucket=E, Key="c", **SSEC_OTHER))
check("sse-c-head-without-key", lambda: root.head_object(Bucket=E, Key="c"))
check("sse-kms-refused", lambda: root.put_object(Bucket=E, Key="k", Body=b"x", ServerSideEncryption="aws:kms"))


def sse_copy_rotate():
    root.copy_object(Bucket=E, Key="c", CopySource={"Bucket": E, "Key": "c"},
                     CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=KEY_B64,
                     CopySourceSSECustomerKeyMD5=KEY_MD5, **SSEC_OTHER)
    expect(root.get_object(Bucket=E, Key="c", **SSEC_OTHER)["Body"].read() == DATA, "rotated")


check("sse-c-copy-new-key", sse_copy_rotate)


def default_encryption():
    root.put_bucket_encryption(Bucket=E, ServerSideEncryptionConfiguration={
        "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
    r = root.put_object(Bucket=E, Key="default", Body=b"x")
    expect(r.get("ServerSideEncryption") == "AES256", "default")
    cfg = root.get_bucket_encryption(Bucket=E)["ServerSideEncryptionConfiguration"]
    expect(cfg["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256", "config")
    root.delete_bucket_encryption(Bucket=E)


check("bucket-default-encryption", default_encryption)
check("get-bucket-encryption-none", lambda: root.get_bucket_encryption(Bucket=E))

# ---------------------------------------------------------------- checksums


def checksum_put():
    r = root.put_object(Bucket=E, Key="sum", Body=DATA, ChecksumAlgorithm="SHA256")
    want = base64.b64encode(hashlib.sha256(DATA).digest()).decode()
    expect(r.get("ChecksumSHA256") == want, "put %s" % r.get("ChecksumSHA256"))
    h = root.head_object(Bucket=E, Key="sum", ChecksumMode="ENABLED")
    expect(h.get("ChecksumSHA256") == want, "head")


check("checksum-sha256-stored", checksum_put)
check("checksum-mismatch", lambda: root.put_object(Bucket=E, Key="bad", Body=b"hello",
                                                   ChecksumSHA256=base64.b64encode(b"\0" * 32).decode()))


def checksum_composite():
    up = root.create_multipart_upload(Bucket=E, Key="mpsum", ChecksumAlgorithm="SHA256")["UploadId"]
    p1 = root.upload_part(Bucket=E, Key="mpsum", UploadId=up, PartNumber=1, Body=P1, ChecksumAlgorithm="SHA256")
    p2 = root.upload_part(Bucket=E, Key="mpsum", UploadId=up, PartNumber=2, Body=P2, ChecksumAlgorithm="SHA256")
    r = root.complete_multipart_upload(Bucket=E, Key="mpsum", UploadId=up, MultipartUpload={"Parts": [
        {"PartNumber": 1, "ETag": p1["ETag"], "ChecksumSHA256": p1["ChecksumSHA256"]},
        {"PartNumber": 2, "ETag": p2["ETag"], "ChecksumSHA256": p2["ChecksumSHA256"]}]})
    want = base64.b64encode(hashlib.sha256(hashlib.sha256(P1).digest() + hashlib.sha256(P2).digest()).digest()).decode() + "-2"
    expect(r.get("ChecksumSHA256") == want, "composite %s want %s" % (r.get("ChecksumSHA256"), want))


check("checksum-multipart-composite", checksum_composite)

# ---------------------------------------------------------------- lifecycle (server day = 2 s)
LC = bucket("conf-lifecycle")
root.create_bucket(Bucket=LC)


def lifecycle():
    root.put_bucket_lifecycle_configuration(Bucket=LC, LifecycleConfiguration={"Rules": [
        {"ID": "cold", "Status": "Enabled", "Filter": {"Prefix": "logs/"},
         "Transitions": [{"Days": 1, "StorageClass": "STANDARD_IA"}], "Expiration": {"Days": 8}}]})
    got = root.get_bucket_lifecycle_configuration(Bucket=LC)["Rules"]
    expect(got[0]["ID"] == "cold" and got[0]["Transitions"][0]["StorageClass"] == "STANDARD_IA", "config")
    root.put_object(Bucket=LC, Key="logs/a", Body=os.urandom(MIB))
    deadline = time.time() + 30
    while root.head_object(Bucket=LC, Key="logs/a").get("StorageClass") != "STANDARD_IA":
        expect(time.time() < deadline, "no transition within 30 s")
        time.sleep(0.5)
    loc = json.loads(subprocess.run([BIN, "--endpoint", ADMIN, "object", "locate", LC + "/logs/a", "--json"],
                                    check=True, capture_output=True, text=True).stdout)
    expect(loc["vector"] == "hdd=2" and set(loc["tiers"]) == {"hdd"}, "placement %s %s" % (loc["vector"], loc["tiers"]))
    deadline = time.time() + 40
    while True:
        try:
            root.head_object(Bucket=LC, Key="logs/a")
        except botocore.exceptions.ClientError:
            return None
        expect(time.time() < deadline, "no expiration within 40 s")
        time.sleep(0.5)


check("lifecycle-transition-then-expire", lifecycle)
check("lifecycle-invalid-class", lambda: root.put_bucket_lifecycle_configuration(Bucket=LC, LifecycleConfiguration={
    "Rules": [{"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""},
               "Transitions": [{"Days": 1, "StorageClass": "DEEP_ARCHIVE"}]}]}))

# ---------------------------------------------------------------- versioning
VB = bucket("conf-versions")
root.create_bucket(Bucket=VB)


def versioning_enable():
    assert root.get_bucket_versioning(Bucket=VB).get("Status") is None, "new bucket reports a versioning status"
    root.put_bucket_versioning(Bucket=VB, VersioningConfiguration={"Status": "Enabled"})
    got = root.get_bucket_versioning(Bucket=VB).get("Status")
    assert got == "Enabled", got


def versioning_versions():
    v1 = root.put_object(Bucket=VB, Key="doc", Body=b"one")["VersionId"]
    v2 = root.put_object(Bucket=VB, Key="doc", Body=b"two")["VersionId"]
    assert v1 and v2 and v1 != v2, (v1, v2)
    assert root.get_object(Bucket=VB, Key="doc")["Body"].read() == b"two", "latest"
    assert root.get_object(Bucket=VB, Key="doc", VersionId=v1)["Body"].read() == b"one", "by version"
    vs = root.list_object_versions(Bucket=VB, Prefix="doc")["Versions"]
    assert [v["VersionId"] for v in vs] == [v2, v1], vs
    assert [v["IsLatest"] for v in vs] == [True, False], vs


def versioning_delete_marker():
    r = root.delete_object(Bucket=VB, Key="doc")
    assert r.get("DeleteMarker") is True and r.get("VersionId"), r
    try:
        root.get_object(Bucket=VB, Key="doc")
        raise AssertionError("GET after delete marker succeeded")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "NoSuchKey", e.response["Error"]
    listing = root.list_object_versions(Bucket=VB, Prefix="doc")
    markers = listing.get("DeleteMarkers", [])
    assert len(markers) == 1 and markers[0]["IsLatest"], listing
    # Removing the marker brings the object back.
    root.delete_object(Bucket=VB, Key="doc", VersionId=markers[0]["VersionId"])
    assert root.get_object(Bucket=VB, Key="doc")["Body"].read() == b"two", "restored"


def versioning_delete_version():
    vs = root.list_object_versions(Bucket=VB, Prefix="doc")["Versions"]
    root.delete_object(Bucket=VB, Key="doc", VersionId=vs[0]["VersionId"])
    assert root.get_object(Bucket=VB, Key="doc")["Body"].read() == b"one", "previous version is latest"


def versioning_suspend():
    root.put_bucket_versioning(Bucket=VB, VersioningConfiguration={"Status": "Suspended"})
    assert root.get_bucket_versioning(Bucket=VB).get("Status") == "Suspended"
    r = root.put_object(Bucket=VB, Key="doc", Body=b"three")
    assert r.get("VersionId") in (None, "null"), r
    ids = [v["VersionId"] for v in root.list_object_versions(Bucket=VB, Prefix="doc")["Versions"]]
    assert "null" in ids and len(ids) == 2, ids


check("versioning-enable", versioning_enable)
check("versioning-versions", versioning_versions)
check("versioning-delete-marker", versioning_delete_marker)
check("versioning-delete-version", versioning_delete_version)
check("versioning-suspend", versioning_suspend)
check("versioning-bad-status", lambda: root.put_bucket_versioning(Bucket=VB, VersioningConfiguration={"Status": "Sometimes"}))
check("versioning-other-user", lambda: alice.get_object(Bucket=VB, Key="doc"))

# ---------------------------------------------------------------- unsupported (the exact answer is the contract)
check("object-lock-bucket", lambda: root.create_bucket(Bucket=bucket("conf-lock"), ObjectLockEnabledForBucket=True))
check("object-lock-configuration", lambda: root.put_object_lock_configuration(
    Bucket=B, ObjectLockConfiguration={"ObjectLockEnabled": "Enabled"}))
check("restore-object", lambda: root.restore_object(Bucket=B, Key="obj", RestoreRequest={"Days": 1}))
check("bucket-replication", lambda: root.put_bucket_replication(Bucket=B, ReplicationConfiguration={
    "Role": "arn:aws:iam::1:role/x", "Rules": [{"Status": "Enabled", "Priority": 1, "Filter": {"Prefix": ""},
                                                 "DeleteMarkerReplication": {"Status": "Disabled"},
                                                 "Destination": {"Bucket": "arn:aws:s3:::x"}}]}))
check("bucket-notification", lambda: root.put_bucket_notification_configuration(
    Bucket=B, NotificationConfiguration={"QueueConfigurations": [{"QueueArn": "arn:aws:sqs:us-east-1:1:q", "Events": ["s3:ObjectCreated:*"]}]}))
check("bucket-logging", lambda: root.put_bucket_logging(Bucket=B, BucketLoggingStatus={}))
check("bucket-accelerate", lambda: root.put_bucket_accelerate_configuration(
    Bucket=B, AccelerateConfiguration={"Status": "Enabled"}))
