package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/users"
)

var userSeq atomic.Int64

// newUser creates a user in the store and returns its name and a client.
func newUser(t *testing.T, admin bool) (string, *s3.Client, users.Credentials) {
	t.Helper()
	name := fmt.Sprintf("u%d-%s", userSeq.Add(1), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")))
	if len(name) > 64 {
		name = name[:64]
	}
	c, err := srv.users.Add(context.Background(), name, admin)
	if err != nil {
		t.Fatal(err)
	}
	return name, clientFor(c.AccessKey, c.SecretKey), c
}

func clientFor(ak, secret string) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(srv.url), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(ak, secret, ""),
		Retryer:     aws.NopRetryer{}, DisableLogOutputChecksumValidationSkipped: true,
	})
}

// anon sends an unsigned request and returns status and body.
func anon(t *testing.T, method, path string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestUsersPrivateBucketsAndListing(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	_, bc, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "doc", []byte("alice's"))

	_, err := bc.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("doc")})
	wantErr(t, "bob reads alice's object", err, "AccessDenied", 403)
	_, err = bc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "bob lists alice's bucket", err, "AccessDenied", 403)
	_, err = bc.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("x"), Body: strings.NewReader("x")})
	wantErr(t, "bob writes alice's bucket", err, "AccessDenied", 403)
	_, err = bc.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &b})
	wantErr(t, "bob deletes alice's bucket", err, "AccessDenied", 403)
	_, err = bc.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b})
	wantErr(t, "bob creates alice's bucket", err, "BucketAlreadyExists", 409)
	_, err = ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b})
	wantErr(t, "alice creates her bucket again", err, "BucketAlreadyOwnedByYou", 409)
	if st, _ := anon(t, http.MethodGet, "/"+b+"/doc", nil); st != 403 {
		t.Fatalf("anonymous read of a private bucket: %d", st)
	}

	// ListBuckets shows each user their own buckets, with owner names.
	lb, err := bc.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range lb.Buckets {
		if *x.Name == b {
			t.Fatal("bob's ListBuckets shows alice's bucket")
		}
	}
	la, err := ac.ListBuckets(ctx, &s3.ListBucketsInput{})
	if err != nil || len(la.Buckets) != 1 || *la.Buckets[0].Name != b || aws.ToString(la.Owner.ID) != alice || aws.ToString(la.Owner.DisplayName) != alice {
		t.Fatalf("alice's ListBuckets: %v %+v", err, la)
	}
	// An admin sees and reads everything.
	_, adm, _ := newUser(t, true)
	if _, err := adm.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("doc")}); err != nil {
		t.Fatalf("admin read: %v", err)
	}
	// The bucket owner reported by fetch-owner listings is alice.
	lo, err := ac.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, FetchOwner: aws.Bool(true)})
	if err != nil || len(lo.Contents) != 1 || aws.ToString(lo.Contents[0].Owner.ID) != alice || aws.ToString(lo.Contents[0].Owner.DisplayName) != alice {
		t.Fatalf("list owner: %v %+v", err, lo.Contents)
	}
}

func TestUserKeyRotationAndRemoval(t *testing.T) {
	ctx := context.Background()
	name, c, creds := newUser(t, false)
	b := newBucket(t, c)
	rot, err := srv.users.RotateKeys(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "old key after rotation", err, "InvalidAccessKeyId", 403)
	nc := clientFor(rot.AccessKey, rot.SecretKey)
	if _, err := nc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b}); err != nil {
		t.Fatalf("rotated keys lost the bucket: %v", err)
	}
	wrong := clientFor(rot.AccessKey, creds.SecretKey)
	_, err = wrong.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "new key, old secret", err, "SignatureDoesNotMatch", 403)
	if err := srv.users.Remove(ctx, name); err != nil {
		t.Fatal(err)
	}
	_, err = nc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "removed user", err, "InvalidAccessKeyId", 403)
}

// TestRemovedUserNameNotReused: the user name is the identity buckets,
// ACL grants and bucket policies refer to, so a user cannot be created
// under a removed user's name while a bucket still is owned by it or names
// it — a new user would inherit the old one's data and grants. Once the
// buckets are gone or the grants taken out, the name can be used again,
// and the new user gets nothing of the old one's.
func TestRemovedUserNameNotReused(t *testing.T) {
	ctx := context.Background()
	root := client(t, testSecret)
	alice, ac, _ := newUser(t, false)
	owned := newBucket(t, ac)
	put(t, ac, owned, "private", []byte("alice's data"))
	bob, _, _ := newUser(t, false)
	shared := newBucket(t, root)
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["` + bob + `"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + shared + `/*"}]}`
	if _, err := root.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &shared, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	carol, _, _ := newUser(t, false)
	granted := fmt.Sprintf("t%d-name-reuse-acl", bucketSeq.Add(1))
	if _, err := root.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &granted, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &granted, GrantRead: aws.String("id=" + carol)}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{alice, bob, carol} {
		if err := srv.users.Remove(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for name, bucket := range map[string]string{alice: owned, bob: shared, carol: granted} {
		_, err := srv.users.Add(ctx, name, false)
		if !errors.Is(err, users.ErrNameInUse) || !strings.Contains(err.Error(), bucket) {
			t.Errorf("re-creating %s, still named by bucket %s: %v", name, bucket, err)
		}
	}
	// versitygw's admin API (create-user) goes through the same store.
	err := NewStoreIAM(srv.users, testUser).CreateAccount(auth.Account{Access: alice, Secret: "a-new-secret", Role: auth.RoleUser})
	var ae s3err.APIError
	if !errors.As(err, &ae) || ae.HTTPStatusCode != 409 || !strings.Contains(ae.Description, owned) {
		t.Errorf("create-user with a name still in use: %v", err)
	}

	// Once nothing names them any more, the names are free again.
	if _, err := root.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &owned, Key: aws.String("private")}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &owned}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.DeleteBucketPolicy(ctx, &s3.DeleteBucketPolicyInput{Bucket: &shared}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &granted, ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	put(t, root, shared, "doc", []byte("root's"))
	for _, name := range []string{alice, bob, carol} {
		c, err := srv.users.Add(ctx, name, false)
		if err != nil {
			t.Fatalf("re-creating %s once nothing names it: %v", name, err)
		}
		nc := clientFor(c.AccessKey, c.SecretKey)
		if _, err := nc.GetObject(ctx, &s3.GetObjectInput{Bucket: &shared, Key: aws.String("doc")}); err == nil {
			t.Errorf("new user %s reads a bucket the removed one was granted", name)
		}
		lb, err := nc.ListBuckets(ctx, &s3.ListBucketsInput{})
		if err != nil || len(lb.Buckets) != 0 {
			t.Errorf("new user %s lists buckets %v (%v)", name, lb, err)
		}
	}
}

// TestChangeBucketOwnerMovesOwnerGrants: re-owning a bucket (versitygw's
// admin change-bucket-owner) hands the new owner the old owner's ACL
// grants; the old owner keeps no access through them, and its name is no
// longer held by the bucket.
func TestChangeBucketOwnerMovesOwnerGrants(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "doc", []byte("data"))
	if err := srv.be.ChangeBucketOwner(ctx, b, bob); err != nil {
		t.Fatal(err)
	}
	_, err := ac.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "previous owner lists the re-owned bucket", err, "AccessDenied", 403)
	if _, err := bc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b}); err != nil {
		t.Fatalf("new owner lists: %v", err)
	}
	raw, err := srv.be.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	acl, err := auth.ParseACL(raw)
	if err != nil || acl.Owner != bob || len(acl.Grantees) != 1 || acl.Grantees[0].Access != bob || acl.Grantees[0].Permission != auth.PermissionFullControl {
		t.Fatalf("ACL after re-owning: %s (%v)", raw, err)
	}
	if what, err := srv.be.nameInUse(ctx, alice); err != nil || what != "" {
		t.Fatalf("previous owner's name still in use: %q %v", what, err)
	}
}

func TestBucketACLGrantsAndPublicRead(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)

	// ACLs need an ownership mode that allows them (AWS: a new bucket is
	// BucketOwnerEnforced and refuses ACLs).
	enforced := newBucket(t, ac)
	_, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &enforced, ACL: types.BucketCannedACLPublicRead})
	wantErr(t, "ACL on a BucketOwnerEnforced bucket", err, "AccessControlListNotSupported", 400)

	b := fmt.Sprintf("t%d-acl-grants", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "doc", []byte("shared"))
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, GrantRead: aws.String("id=" + bob)}); err != nil {
		t.Fatalf("grant read: %v", err)
	}
	// versitygw's grant syntax is the bare ID as well.
	acl, err := ac.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(acl.Owner.ID) != alice || aws.ToString(acl.Owner.DisplayName) != alice {
		t.Fatalf("bucket ACL owner %+v", acl.Owner)
	}
	var sawBob bool
	for _, g := range acl.Grants {
		if aws.ToString(g.Grantee.ID) == bob && g.Permission == types.PermissionRead {
			sawBob = aws.ToString(g.Grantee.DisplayName) == bob
		}
	}
	if !sawBob {
		t.Fatalf("bucket ACL grants %+v lack bob READ with a display name", acl.Grants)
	}
	got, _ := get(t, bc, b, "doc")
	if string(got) != "shared" {
		t.Fatal("bob cannot read with a READ grant")
	}
	_, err = bc.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("x"), Body: strings.NewReader("x")})
	wantErr(t, "bob writes with READ only", err, "AccessDenied", 403)
	_, err = ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, GrantRead: aws.String("id=nobody-such")})
	if err == nil {
		t.Fatal("grant to a user that does not exist accepted")
	}

	// public-read: anonymous reads work, anonymous writes do not.
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	if st, body := anon(t, http.MethodGet, "/"+b+"/doc", nil); st != 200 || string(body) != "shared" {
		t.Fatalf("anonymous read of a public-read bucket: %d %q", st, body)
	}
	if st, _ := anon(t, http.MethodPut, "/"+b+"/anon", []byte("x")); st != 403 {
		t.Fatalf("anonymous write to a public-read bucket: %d", st)
	}
}

func TestBucketPolicyCrossUser(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "in/doc", []byte("p"))
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
	 {"Effect":"Allow","Principal":{"AWS":[%q]},"Action":["s3:PutObject","s3:GetObject"],"Resource":["arn:aws:s3:::%s/in/*"]},
	 {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::%s/public/*"}]}`, bob, b, b)
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatalf("put policy: %v", err)
	}
	put(t, bc, b, "in/bob", []byte("from bob"))
	if got, _ := get(t, bc, b, "in/doc"); string(got) != "p" {
		t.Fatal("bob cannot read what the policy allows")
	}
	_, err := bc.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("out/x"), Body: strings.NewReader("x")})
	wantErr(t, "bob writes outside the policy's prefix", err, "AccessDenied", 403)
	put(t, ac, b, "public/page", []byte("hello world"))
	if st, body := anon(t, http.MethodGet, "/"+b+"/public/page", nil); st != 200 || string(body) != "hello world" {
		t.Fatalf("anonymous read allowed by policy: %d %q", st, body)
	}
	if st, _ := anon(t, http.MethodGet, "/"+b+"/in/doc", nil); st != 403 {
		t.Fatalf("anonymous read outside the policy: %d", st)
	}
	bad := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["no-such-user"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`
	_, err = ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &bad})
	wantErr(t, "policy naming a missing user", err, "MalformedPolicy", 400)
}

func TestObjectACL(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	bob, _, _ := newUser(t, false)
	enforced := newBucket(t, ac)
	put(t, ac, enforced, "k", []byte("v"))
	// GetObjectAcl answers AWS's AccessControlPolicy document.
	oa, err := ac.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &enforced, Key: aws.String("k")})
	if err != nil || aws.ToString(oa.Owner.ID) != alice || aws.ToString(oa.Owner.DisplayName) != alice || len(oa.Grants) != 1 ||
		aws.ToString(oa.Grants[0].Grantee.ID) != alice || oa.Grants[0].Permission != types.PermissionFullControl {
		t.Fatalf("object ACL: %v %+v", err, oa)
	}
	raw := rawGet(t, ac, "/"+enforced+"/k?acl")
	if !strings.Contains(raw, "<AccessControlPolicy") || !strings.Contains(raw, `xsi:type="CanonicalUser"`) {
		t.Fatalf("object ACL XML is not AWS's: %s", raw)
	}
	_, err = ac.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: &enforced, Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead})
	wantErr(t, "object ACL on a BucketOwnerEnforced bucket", err, "AccessControlListNotSupported", 400)

	b := fmt.Sprintf("t%d-object-acl", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "k", []byte("v"))
	if _, err := ac.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: &b, Key: aws.String("k"), ACL: types.ObjectCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	oa, err = ac.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &b, Key: aws.String("k")})
	if err != nil || len(oa.Grants) != 2 || oa.Grants[1].Grantee.Type != types.TypeGroup ||
		aws.ToString(oa.Grants[1].Grantee.URI) != "http://acs.amazonaws.com/groups/global/AllUsers" || oa.Grants[1].Permission != types.PermissionRead {
		t.Fatalf("public-read object ACL: %v %+v", err, oa.Grants)
	}
	if _, err := ac.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: &b, Key: aws.String("k"), GrantRead: aws.String("id=" + bob)}); err != nil {
		t.Fatal(err)
	}
	oa, err = ac.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &b, Key: aws.String("k")})
	// Grant headers replace the whole ACL (the owner keeps ownership, not
	// a grant), as on AWS.
	if err != nil || len(oa.Grants) != 1 || aws.ToString(oa.Grants[0].Grantee.ID) != bob || aws.ToString(oa.Owner.ID) != alice {
		t.Fatalf("grant-read object ACL: %v %+v", err, oa.Grants)
	}
	// An ACL given at upload is stored too.
	put(t, ac, b, "k2", []byte("v"), func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLBucketOwnerFullControl })
	oa, err = ac.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &b, Key: aws.String("k2")})
	if err != nil || len(oa.Grants) != 1 {
		t.Fatalf("upload ACL: %v %+v", err, oa)
	}
	_, err = ac.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: &b, Key: aws.String("missing"), ACL: types.ObjectCannedACLPrivate})
	wantErr(t, "ACL of a missing object", err, "NoSuchKey", 404)
}

// rawGet sends a signed GET and returns the body.
func rawGet(t *testing.T, _ *s3.Client, path string) string {
	t.Helper()
	st, body, _ := signed(t, testUser, testSecret, http.MethodGet, path, nil, nil)
	if st != 200 {
		t.Fatalf("GET %s: %d %s", path, st, body)
	}
	return string(body)
}

func TestObjectOwnership(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	for _, tc := range []struct {
		mode        types.ObjectOwnership
		acl         types.ObjectCannedACL
		wantOwner   string
		wantGrants  int
		wantRefusal bool
	}{
		{types.ObjectOwnershipObjectWriter, "", bob, 1, false},
		{types.ObjectOwnershipBucketOwnerPreferred, "", bob, 1, false},
		{types.ObjectOwnershipBucketOwnerPreferred, types.ObjectCannedACLBucketOwnerFullControl, alice, 1, false},
		{types.ObjectOwnershipObjectWriter, types.ObjectCannedACLBucketOwnerFullControl, bob, 2, false},
		{types.ObjectOwnershipBucketOwnerEnforced, "", alice, 1, false},
		{types.ObjectOwnershipBucketOwnerEnforced, types.ObjectCannedACLPublicRead, "", 0, true},
		// rclone sends x-amz-acl: private by default; it means what the
		// bucket enforces anyway.
		{types.ObjectOwnershipBucketOwnerEnforced, types.ObjectCannedACLPrivate, alice, 1, false},
	} {
		name := fmt.Sprintf("%s %q", tc.mode, tc.acl)
		b := fmt.Sprintf("t%d-ownership", bucketSeq.Add(1))
		if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: tc.mode}); err != nil {
			t.Fatal(err)
		}
		policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":[%q]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::%s/*"}]}`, bob, b)
		if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
			t.Fatal(err)
		}
		_, err := bc.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("k"), Body: strings.NewReader("v"), ACL: tc.acl})
		if tc.wantRefusal {
			wantErr(t, name, err, "AccessControlListNotSupported", 400)
			continue
		}
		if err != nil {
			t.Fatalf("%s: bob's put: %v", name, err)
		}
		oa, err := ac.GetObjectAcl(ctx, &s3.GetObjectAclInput{Bucket: &b, Key: aws.String("k")})
		if err != nil || aws.ToString(oa.Owner.ID) != tc.wantOwner || len(oa.Grants) != tc.wantGrants {
			t.Fatalf("%s: owner %q grants %d, want %q %d (%v)", name, aws.ToString(oa.Owner.ID), len(oa.Grants), tc.wantOwner, tc.wantGrants, err)
		}
	}
}
