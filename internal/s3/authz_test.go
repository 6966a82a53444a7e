package s3

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// BlockPublicPolicy decides publicness from the parsed policy, so
// whitespace, arrays and JSON escapes in the Principal do not hide "*".
func TestBlockPublicPolicyParsedPrincipal(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	for i, principal := range []string{"{\n    \"AWS\": [\n      \"*\"\n    ]\n  }", "{\"AWS\":\t\"*\"}", "{\"AWS\":\n\"*\"}", `"\u002a"`} {
		b := newBucket(t, ac)
		put(t, ac, b, "page", []byte("private"))
		c := types.PublicAccessBlockConfiguration{BlockPublicPolicy: aws.Bool(true), BlockPublicAcls: aws.Bool(true)}
		if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b, PublicAccessBlockConfiguration: &c}); err != nil {
			t.Fatal(err)
		}
		policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":` + principal + `,"Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`
		_, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy})
		if err == nil {
			st, body := anon(t, http.MethodGet, "/"+b+"/page", nil)
			t.Errorf("case %d: public policy %q accepted under BlockPublicPolicy; anonymous GET: %d %q", i, principal, st, body)
			continue
		}
		wantErr(t, fmt.Sprintf("case %d", i), err, "AccessDenied", 403)
	}
}

func TestPolicyIsPublic(t *testing.T) {
	for _, c := range []struct {
		policy string
		want   bool
	}{
		{`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, true},
		{`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, true},
		{"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":{\"AWS\":[\n\"*\"\n]},\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\"}]}", true},
		{`{"Statement":[{"Effect":"Allow","Principal":"\u002a","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, true},
		{`{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, false},
		{`{"Statement":[{"Effect":"Allow","Principal":{"AWS":["alice"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`, false},
		{"{\"Statement\":[{\"Effect\":\"Allow\",\"Principal\":[\"alice\",\n\"*\"],\"Action\":\"s3:GetObject\",\"Resource\":\"arn:aws:s3:::b/*\"}]}", true},
		{`not json`, false},
	} {
		if got := policyIsPublic([]byte(c.policy)); got != c.want {
			t.Errorf("policyIsPublic(%s) = %v, want %v", c.policy, got, c.want)
		}
	}
}

// A request is anonymous exactly when versitygw treats it so: no
// Authorization header and no non-empty presigned-URL parameter. An empty
// X-Amz-Signature does not make it signed (and so does not get it past
// RestrictPublicBuckets).
func TestRestrictPublicBucketsEmptyPresignParams(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "page", []byte("secret-ish"))
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::` + b + `/*","arn:aws:s3:::` + b + `"]}]}`
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	c := types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)}
	if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b, PublicAccessBlockConfiguration: &c}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?X-Amz-Signature=", "?X-Amz-Signature=&X-Amz-Credential=", "?Signature=&Expires="} {
		if st, body := anon(t, http.MethodGet, "/"+b+"/page"+q, nil); st != 403 {
			t.Errorf("anonymous read %q of a restricted bucket: %d %q", q, st, body)
		}
		if st, body := anon(t, http.MethodGet, "/"+b+q, nil); st != 403 {
			t.Errorf("anonymous list %q of a restricted bucket: %d %.200q", q, st, body)
		}
	}
}

// Switching a bucket to BucketOwnerEnforced is refused while its ACL grants
// anyone but the owner (AWS's InvalidBucketAclWithObjectOwnership); once
// the ACL is private the switch goes through. A BucketOwnerEnforced bucket
// whose ACL still names others (stored before this check) does not grant
// them anything.
func TestOwnerEnforcedDisablesBucketACL(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-enforced-later", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "doc", []byte("v"))
	enforce := func() error {
		_, err := ac.PutBucketOwnershipControls(ctx, &s3.PutBucketOwnershipControlsInput{Bucket: &b, OwnershipControls: &types.OwnershipControls{
			Rules: []types.OwnershipControlsRule{{ObjectOwnership: types.ObjectOwnershipBucketOwnerEnforced}}}})
		return err
	}
	for _, grant := range []*s3.PutBucketAclInput{
		{Bucket: &b, ACL: types.BucketCannedACLPublicReadWrite},
		{Bucket: &b, GrantRead: aws.String(`id="` + bob + `"`)},
	} {
		if _, err := ac.PutBucketAcl(ctx, grant); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "switch to BucketOwnerEnforced with a granting ACL", enforce(), "InvalidBucketAclWithObjectOwnership", 400)
	}
	if _, err := bc.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("doc")}); err != nil {
		t.Fatalf("ObjectWriter bucket: bob's ACL grant: %v", err)
	}
	rawACL, err := srv.be.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPrivate}); err != nil {
		t.Fatal(err)
	}
	if err := enforce(); err != nil {
		t.Fatalf("switch to BucketOwnerEnforced with a private ACL: %v", err)
	}
	// A granting ACL left from before (put back under the record's feet).
	if err := srv.be.putAttr(ctx, "test", b, attrACL, rawACL); err != nil {
		t.Fatal(err)
	}
	_, err = bc.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("doc")})
	wantErr(t, "BucketOwnerEnforced bucket: bob reads through an old ACL grant", err, "AccessDenied", 403)
	if got, _ := get(t, ac, b, "doc"); string(got) != "v" {
		t.Errorf("owner reads %q", got)
	}
	out, err := ac.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range out.Grants {
		if g.Grantee != nil && aws.ToString(g.Grantee.ID) == bob {
			t.Errorf("BucketOwnerEnforced bucket: GetBucketAcl shows bob's old grant")
		}
	}
}

// An old public-read-write ACL does not let anonymous requests into a
// BucketOwnerEnforced bucket.
func TestOwnerEnforcedIgnoresOldPublicACL(t *testing.T) {
	ctx := context.Background()
	alice, ac, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "doc", []byte("v"))
	acl := []byte(`{"Owner":"` + alice + `","Grantees":[{"Permission":"READ","Access":"all-users","Type":"Group"},{"Permission":"WRITE","Access":"all-users","Type":"Group"}]}`)
	if err := srv.be.putAttr(ctx, "test", b, attrACL, acl); err != nil {
		t.Fatal(err)
	}
	if st, body := anon(t, http.MethodGet, "/"+b+"/doc", nil); st != 403 {
		t.Errorf("BucketOwnerEnforced bucket: anonymous read through an old public ACL: %d %q", st, body)
	}
	if st, body := anon(t, http.MethodPut, "/"+b+"/anon", []byte("x")); st != 403 {
		t.Errorf("BucketOwnerEnforced bucket: anonymous write through an old public ACL: %d %q", st, body)
	}
	if got, _ := get(t, ac, b, "doc"); string(got) != "v" {
		t.Errorf("owner reads %q", got)
	}
}

// With IgnorePublicAcls, an anonymous request is decided by the bucket
// policy alone: a public policy allowing some of the bucket does not let
// the public ACL grant the rest.
func TestIgnorePublicAclsPolicyAlone(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-ignore-acls", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "public/page", []byte("hello"))
	put(t, ac, b, "private/doc", []byte("not for anyone"))
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicReadWrite}); err != nil {
		t.Fatal(err)
	}
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/public/*"}]}`
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	c := types.PublicAccessBlockConfiguration{IgnorePublicAcls: aws.Bool(true)}
	if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b, PublicAccessBlockConfiguration: &c}); err != nil {
		t.Fatal(err)
	}
	if st, body := anon(t, http.MethodGet, "/"+b+"/public/page", nil); st != 200 {
		t.Fatalf("anonymous read allowed by the public policy: %d %q", st, body)
	}
	if st, body := anon(t, http.MethodGet, "/"+b+"/private/doc", nil); st != 403 {
		t.Errorf("IgnorePublicAcls: anonymous read granted only by the public ACL: %d %q", st, body)
	}
	if st, body := anon(t, http.MethodGet, "/"+b, nil); st != 403 {
		t.Errorf("IgnorePublicAcls: anonymous listing granted only by the public ACL: %d %.300q", st, body)
	}
	if st, body := anon(t, http.MethodPut, "/"+b+"/public/new", []byte("x")); st != 403 {
		t.Errorf("IgnorePublicAcls: anonymous write granted only by the public ACL: %d %.300q", st, body)
	}
	// The ACL itself is unchanged: without the block it grants again.
	if _, err := ac.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	if st, body := anon(t, http.MethodGet, "/"+b+"/private/doc", nil); st != 200 {
		t.Errorf("no public access block: anonymous read through the public ACL: %d %q", st, body)
	}
}

// The source of CopyObject and UploadPartCopy is authorized for the bare
// key: naming a version (?versionId=) does not escape a Deny on the
// object's ARN.
func TestCopySourceVersionIdAuthorizedForKey(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	b := newBucket(t, ac)
	put(t, ac, b, "secret", []byte("top secret"))
	put(t, ac, b, "open", []byte("fine"))
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[
	 {"Effect":"Allow","Principal":{"AWS":[%q]},"Action":["s3:GetObject","s3:GetObjectVersion"],"Resource":"arn:aws:s3:::%s/*"},
	 {"Effect":"Deny","Principal":{"AWS":[%q]},"Action":["s3:GetObject","s3:GetObjectVersion"],"Resource":"arn:aws:s3:::%s/secret"}]}`, bob, b, bob, b)
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	_, err := bc.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("secret")})
	wantErr(t, "bob reads the denied object", err, "AccessDenied", 403)
	mine := newBucket(t, bc)
	_, err = bc.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &mine, Key: aws.String("c0"), CopySource: aws.String(b + "/secret")})
	wantErr(t, "bob copies the denied object", err, "AccessDenied", 403)
	_, err = bc.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &mine, Key: aws.String("c1"), CopySource: aws.String(b + "/secret?versionId=null")})
	wantErr(t, "bob copies the denied object naming its null version", err, "AccessDenied", 403)
	up, err := bc.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &mine, Key: aws.String("c2")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bc.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &mine, Key: aws.String("c2"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), CopySource: aws.String(b + "/secret?versionId=null")})
	wantErr(t, "bob part-copies the denied object naming its null version", err, "AccessDenied", 403)
	// What the policy allows still copies, with or without a version; the
	// owner is not affected.
	for _, src := range []string{b + "/open", b + "/open?versionId=null"} {
		if _, err := bc.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &mine, Key: aws.String("ok"), CopySource: aws.String(src)}); err != nil {
			t.Errorf("bob copies %s: %v", src, err)
		}
	}
	if _, err := ac.CopyObject(ctx, &s3.CopyObjectInput{Bucket: &b, Key: aws.String("copy"), CopySource: aws.String(b + "/secret?versionId=null")}); err != nil {
		t.Errorf("owner copies its own object naming a version: %v", err)
	}
}

// A snapshot is read under its source bucket's policy: a Deny on part of
// the bucket also denies it in the snapshot (whoever the ACL lets read the
// bucket), and an Allow also allows it there.
func TestSnapshotFollowsBucketPolicy(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	bob, bc, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-snap-policy", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "public/page", []byte("hello"))
	put(t, ac, b, "secret/doc", []byte("not for anyone"), func(in *s3.PutObjectInput) { in.ACL = types.ObjectCannedACLPublicRead })
	put(t, ac, b, "shared/doc", []byte("for bob"))
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatal(err)
	}
	policy := `{"Version":"2012-10-17","Statement":[` +
		`{"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/secret/*"},` +
		`{"Effect":"Allow","Principal":{"AWS":["` + bob + `"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + b + `/shared/*"]}]}`
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	snap, err := srv.layer.CreateSnapshot(ctx, b, "s1")
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range []string{b, snap.Served} {
		if st, body := anon(t, http.MethodGet, "/"+bucket+"/public/page", nil); st != 200 {
			t.Errorf("%s: anonymous read the public ACL grants: %d %q", bucket, st, body)
		}
		if st, body := anon(t, http.MethodGet, "/"+bucket+"/secret/doc", nil); st != 403 {
			t.Errorf("%s: anonymous read the policy denies: %d %q", bucket, st, body)
		}
		_, err := bc.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("secret/doc")})
		wantErr(t, bucket+": bob reads what the policy denies", err, "AccessDenied", 403)
		if _, err := bc.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("shared/doc")}); err != nil {
			t.Errorf("%s: bob reads what the policy allows him: %v", bucket, err)
		}
	}
	// The policy the snapshot answers with names the snapshot's bucket.
	got, err := ac.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: &snap.Served})
	if err != nil {
		t.Fatal(err)
	}
	if p := aws.ToString(got.Policy); !strings.Contains(p, "arn:aws:s3:::"+snap.Served+"/secret/*") || strings.Contains(p, "arn:aws:s3:::"+b+"/") {
		t.Errorf("a snapshot's policy: %s", p)
	}
}

func TestSnapshotPolicyRenames(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"Statement":{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::p/*"}}`,
			`{"Statement":{"Action":"s3:*","Effect":"Deny","Principal":"*","Resource":"arn:aws:s3:::p--snap-x/*"}}`},
		{`{"Statement":[{"Resource":["arn:aws:s3:::p","arn:aws:s3:::p*","arn:aws:s3:::pq/a","arn:aws:s3:::p/a"],"Condition":{"NumericLessThan":{"s3:max-keys":10.50}}}]}`,
			`{"Statement":[{"Condition":{"NumericLessThan":{"s3:max-keys":10.50}},"Resource":["arn:aws:s3:::p--snap-x","arn:aws:s3:::p--snap-x*","arn:aws:s3:::pq/a","arn:aws:s3:::p--snap-x/a"]}]}`},
	} {
		got, err := snapshotPolicy([]byte(c.in), "p", "p--snap-x")
		if err != nil || string(got) != c.want {
			t.Errorf("snapshotPolicy(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`not json`, `{"Statement":"x"}`, `{"Statement":[{"Resource":7}]}`, `{"Statement":[{"Resource":["a",7]}]}`, `{"Statement":[7]}`} {
		if got, err := snapshotPolicy([]byte(bad), "p", "p--snap-x"); err == nil {
			t.Errorf("snapshotPolicy(%s) = %s, want an error", bad, got)
		}
	}
}

// IgnorePublicAcls ignores grants to AllUsers for signed requests too: a
// signed-in user the ACL names only through the public grant is refused,
// a user granted by name, the owner and the policy still decide, and the
// ACL document still shows the public grant.
func TestIgnorePublicAclsSignedRequests(t *testing.T) {
	ctx := context.Background()
	owner, ac, _ := newUser(t, false)
	_, bc, _ := newUser(t, false)
	carol, cc, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-ignore-signed", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	put(t, ac, b, "doc", []byte("hello"))
	grant := fmt.Sprintf("uri=%q, id=%q", "http://acs.amazonaws.com/groups/global/AllUsers", carol)
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, GrantRead: &grant, GrantFullControl: aws.String(fmt.Sprintf("id=%q", owner))}); err != nil {
		t.Fatal(err)
	}
	read := func(c *s3.Client) error {
		_, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("doc")})
		return err
	}
	if err := read(bc); err != nil {
		t.Fatalf("no block: bob reads through the public grant: %v", err)
	}
	c := types.PublicAccessBlockConfiguration{IgnorePublicAcls: aws.Bool(true)}
	if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b, PublicAccessBlockConfiguration: &c}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "IgnorePublicAcls: bob reads through the public grant", read(bc), "AccessDenied", 403)
	_, err := bc.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b})
	wantErr(t, "IgnorePublicAcls: bob lists through the public grant", err, "AccessDenied", 403)
	if err := read(cc); err != nil {
		t.Errorf("IgnorePublicAcls: carol, granted by name: %v", err)
	}
	if err := read(ac); err != nil {
		t.Errorf("IgnorePublicAcls: the owner: %v", err)
	}
	acl, err := ac.GetBucketAcl(ctx, &s3.GetBucketAclInput{Bucket: &b})
	if err != nil {
		t.Fatal(err)
	}
	public := false
	for _, g := range acl.Grants {
		public = public || aws.ToString(g.Grantee.URI) == "http://acs.amazonaws.com/groups/global/AllUsers"
	}
	if !public {
		t.Errorf("the owner's GetBucketAcl lost the public grant under IgnorePublicAcls: %+v", acl.Grants)
	}
}
