package s3

import (
	"context"
	"fmt"
	"net/http"
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
