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

func TestPublicAccessBlock(t *testing.T) {
	ctx := context.Background()
	_, ac, _ := newUser(t, false)
	b := fmt.Sprintf("t%d-pab", bucketSeq.Add(1))
	if _, err := ac.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &b, ObjectOwnership: types.ObjectOwnershipObjectWriter}); err != nil {
		t.Fatal(err)
	}
	_, err := ac.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: &b})
	wantErr(t, "no public access block", err, "NoSuchPublicAccessBlockConfiguration", 404)
	put(t, ac, b, "page", []byte("hello"))
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + b + `/*"}]}`
	if _, err := ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy}); err != nil {
		t.Fatal(err)
	}
	if st, _ := anon(t, http.MethodGet, "/"+b+"/page", nil); st != 200 {
		t.Fatalf("public policy read: %d", st)
	}
	set := func(c types.PublicAccessBlockConfiguration) {
		t.Helper()
		if _, err := ac.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{Bucket: &b, PublicAccessBlockConfiguration: &c}); err != nil {
			t.Fatal(err)
		}
	}
	// RestrictPublicBuckets: anonymous access ends despite the policy.
	set(types.PublicAccessBlockConfiguration{RestrictPublicBuckets: aws.Bool(true)})
	if st, _ := anon(t, http.MethodGet, "/"+b+"/page", nil); st != 403 {
		t.Fatalf("restricted bucket anonymous read: %d", st)
	}
	got, err := ac.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: &b})
	if err != nil || !aws.ToBool(got.PublicAccessBlockConfiguration.RestrictPublicBuckets) || aws.ToBool(got.PublicAccessBlockConfiguration.BlockPublicAcls) {
		t.Fatalf("get public access block: %v %+v", err, got)
	}
	// The owner still reads.
	if _, err := ac.GetObject(ctx, &s3.GetObjectInput{Bucket: &b, Key: aws.String("page")}); err != nil {
		t.Fatal(err)
	}
	// Block* refuse new public ACLs and policies.
	set(types.PublicAccessBlockConfiguration{BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true)})
	_, err = ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicRead})
	wantErr(t, "public bucket ACL under BlockPublicAcls", err, "AccessDenied", 403)
	_, err = ac.PutObjectAcl(ctx, &s3.PutObjectAclInput{Bucket: &b, Key: aws.String("page"), ACL: types.ObjectCannedACLPublicRead})
	wantErr(t, "public object ACL under BlockPublicAcls", err, "AccessDenied", 403)
	_, err = ac.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("x"), Body: strings.NewReader("x"), ACL: types.ObjectCannedACLPublicRead})
	wantErr(t, "public upload ACL under BlockPublicAcls", err, "AccessDenied", 403)
	_, err = ac.PutBucketPolicy(ctx, &s3.PutBucketPolicyInput{Bucket: &b, Policy: &policy})
	wantErr(t, "public policy under BlockPublicPolicy", err, "AccessDenied", 403)
	// The old public policy still applies (Restrict is off now).
	if st, _ := anon(t, http.MethodGet, "/"+b+"/page", nil); st != 200 {
		t.Fatalf("public policy read after lifting Restrict: %d", st)
	}
	if _, err := ac.DeletePublicAccessBlock(ctx, &s3.DeletePublicAccessBlockInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.PutBucketAcl(ctx, &s3.PutBucketAclInput{Bucket: &b, ACL: types.BucketCannedACLPublicRead}); err != nil {
		t.Fatalf("public ACL after deleting the block: %v", err)
	}
}

func TestObjectLockRefused(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(fmt.Sprintf("t%d-lock", bucketSeq.Add(1))), ObjectLockEnabledForBucket: aws.Bool(true)})
	wantErr(t, "create with object lock", err, "NotImplemented", 501)
	if !strings.Contains(err.Error(), "retention and legal hold") {
		t.Fatalf("object lock refusal does not say what is missing: %v", err)
	}
	b := newBucket(t, c)
	_, err = c.PutObjectLockConfiguration(ctx, &s3.PutObjectLockConfigurationInput{Bucket: &b, ObjectLockConfiguration: &types.ObjectLockConfiguration{
		ObjectLockEnabled: types.ObjectLockEnabledEnabled}})
	wantErr(t, "put object lock configuration", err, "NotImplemented", 501)
	put(t, c, b, "k", []byte("v"))
	_, err = c.PutObjectLegalHold(ctx, &s3.PutObjectLegalHoldInput{Bucket: &b, Key: aws.String("k"), LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	if err == nil {
		t.Fatal("legal hold accepted")
	}
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: aws.String("l"), Body: strings.NewReader("x"), ObjectLockLegalHoldStatus: types.ObjectLockLegalHoldStatusOn})
	wantErr(t, "put with legal hold", err, "InvalidRequest", 400)
}
