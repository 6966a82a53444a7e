package s3

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/terrace-storage/terrace/internal/lifecycle"
	"github.com/terrace-storage/terrace/internal/object"
)

func TestLifecycleConfigurationAPI(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	_, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &b})
	wantErr(t, "no lifecycle", err, "NoSuchLifecycleConfiguration", 404)
	cfg := &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
		{ID: aws.String("logs"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassStandardIa}},
			Expiration:  &types.LifecycleExpiration{Days: aws.Int32(365)}},
		{ID: aws.String("tmp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(7)}},
		{ID: aws.String("tagged"), Status: types.ExpirationStatusDisabled, Filter: &types.LifecycleRuleFilter{
			And: &types.LifecycleRuleAndOperator{Prefix: aws.String("x/"), Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}},
			Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}},
	}}
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &b, LifecycleConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &b})
	if err != nil || len(got.Rules) != 3 {
		t.Fatalf("get lifecycle: %v %+v", err, got)
	}
	r0, r2 := got.Rules[0], got.Rules[2]
	if aws.ToString(r0.ID) != "logs" || aws.ToString(r0.Filter.Prefix) != "logs/" || aws.ToInt32(r0.Transitions[0].Days) != 30 ||
		r0.Transitions[0].StorageClass != types.TransitionStorageClassStandardIa || aws.ToInt32(r0.Expiration.Days) != 365 {
		t.Fatalf("rule 0 round trip: %+v", r0)
	}
	if r2.Status != types.ExpirationStatusDisabled || r2.Filter.And == nil || aws.ToString(r2.Filter.And.Prefix) != "x/" ||
		len(r2.Filter.And.Tags) != 1 || !r2.Expiration.Date.Equal(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("rule 2 round trip: %+v", r2)
	}
	for _, bad := range []struct {
		what string
		rule types.LifecycleRule
		code string
	}{
		{"unknown class", types.LifecycleRule{ID: aws.String("a"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Transitions: []types.Transition{{Days: aws.Int32(1), StorageClass: types.TransitionStorageClassDeepArchive}}}, "InvalidArgument"},
		{"expiration before transition", types.LifecycleRule{ID: aws.String("a"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Transitions: []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassStandardIa}},
			Expiration:  &types.LifecycleExpiration{Days: aws.Int32(10)}}, "InvalidArgument"},
		{"no action", types.LifecycleRule{ID: aws.String("a"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")}}, "InvalidArgument"},
		{"bad status", types.LifecycleRule{ID: aws.String("a"), Status: "Maybe", Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)}}, "MalformedXML"},
	} {
		_, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &b,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{bad.rule}}})
		wantErr(t, bad.what, err, bad.code, 400)
	}
	// Another user may not touch it.
	_, uc, _ := newUser(t, false)
	_, err = uc.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &b})
	wantErr(t, "other user's lifecycle", err, "AccessDenied", 403)
	if _, err := c.DeleteBucketLifecycle(ctx, &s3.DeleteBucketLifecycleInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: &b})
	wantErr(t, "deleted lifecycle", err, "NoSuchLifecycleConfiguration", 404)
}

// TestLifecycleRunnerTransitionsAndExpires drives the runner with a clock
// set into the future: a Transition to STANDARD_IA moves the object's
// replicas to hdd by itself, Expiration deletes it, and stale uploads are
// aborted.
func TestLifecycleRunnerTransitionsAndExpires(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	if _, err := c.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{Bucket: &b,
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{
			{ID: aws.String("age"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
				Transitions:                    []types.Transition{{Days: aws.Int32(30), StorageClass: types.TransitionStorageClassStandardIa}},
				Expiration:                     &types.LifecycleExpiration{Days: aws.Int32(365)},
				AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(7)}},
		}}}); err != nil {
		t.Fatal(err)
	}
	data := randBytes(5, 2<<20+3)
	put(t, c, b, "logs/plain", data, func(in *s3.PutObjectInput) { in.StorageClass = types.StorageClassExpressOnezone })
	put(t, c, b, "logs/enc", data, sseS3)
	put(t, c, b, "keep/x", data)
	id := startUpload(t, c, b, "logs/upload")

	clock := time.Now()
	run := func(at time.Duration) lifecycle.RunReport {
		t.Helper()
		r := lifecycle.New(srv.layer, lifecycle.Options{Now: func() time.Time { return clock.Add(at) }})
		pending, err := r.Pending(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := r.RunOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The dry run predicted what the run did, for this bucket.
		for _, pr := range pending.Rules {
			if pr.Bucket != b {
				continue
			}
			for _, rr := range rep.Rules {
				if rr.Bucket == b && rr.Rule == pr.Rule && (rr.Transition != pr.Transition || rr.Expire != pr.Expire || rr.AbortUploads != pr.AbortUploads) {
					t.Fatalf("dry run %+v, run %+v", pr, rr)
				}
			}
		}
		return rep
	}
	bucketRule := func(rep lifecycle.RunReport) lifecycle.RuleReport {
		for _, rr := range rep.Rules {
			if rr.Bucket == b {
				return rr
			}
		}
		return lifecycle.RuleReport{}
	}

	// Day 1: nothing due; the report shows what waits.
	rr := bucketRule(run(24 * time.Hour))
	if rr.Transition != 0 || rr.Expire != 0 || rr.Waiting != 2 || rr.NextDue == "" {
		t.Fatalf("day 1: %+v", rr)
	}
	// Day 10: the upload is aborted.
	rr = bucketRule(run(10 * 24 * time.Hour))
	if rr.AbortUploads != 1 {
		t.Fatalf("day 10: %+v", rr)
	}
	_, err := c.ListParts(ctx, &s3.ListPartsInput{Bucket: &b, Key: aws.String("logs/upload"), UploadId: &id})
	wantErr(t, "aborted upload", err, "NoSuchUpload", 404)
	// Day 31: both logs objects move to STANDARD_IA, i.e. to hdd.
	rr = bucketRule(run(31 * 24 * time.Hour))
	if rr.Transition != 2 {
		t.Fatalf("day 31: %+v", rr)
	}
	for _, k := range []string{"logs/plain", "logs/enc"} {
		h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String(k)})
		if err != nil || h.StorageClass != types.StorageClassStandardIa {
			t.Fatalf("%s after transition: %v class %q", k, err, h.StorageClass)
		}
		loc, err := srv.layer.Locate(ctx, b, k)
		if err != nil || loc.Vector != "hdd=2" {
			t.Fatalf("%s vector after transition: %v %v", k, loc.Vector, err)
		}
		for tier, n := range loc.Tiers {
			if tier != "hdd" && n > 0 {
				t.Fatalf("%s: %d replicas on %s after the transition to hdd (%v)", k, n, tier, loc.Tiers)
			}
		}
		if loc.Tiers["hdd"] == 0 {
			t.Fatalf("%s: no hdd replicas after the transition (%v)", k, loc.Tiers)
		}
		got, _ := get(t, c, b, k)
		if !bytes.Equal(got, data) {
			t.Fatalf("%s unreadable after transition", k)
		}
	}
	if h, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("keep/x")}); err != nil || h.StorageClass == types.StorageClassStandardIa {
		t.Fatalf("object outside the rule moved: %v", err)
	}
	// A second run at the same time does nothing more.
	if rr = bucketRule(run(31 * 24 * time.Hour)); rr.Transition != 0 {
		t.Fatalf("repeated run transitioned again: %+v", rr)
	}
	// Day 366: both expire.
	rr = bucketRule(run(366 * 24 * time.Hour))
	if rr.Expire != 2 {
		t.Fatalf("day 366: %+v", rr)
	}
	for _, k := range []string{"logs/plain", "logs/enc"} {
		_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String(k)})
		wantErr(t, k+" after expiration", err, "NotFound", 404)
	}
	if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &b, Key: aws.String("keep/x")}); err != nil {
		t.Fatalf("object outside the rule expired: %v", err)
	}
}

// TestLifecycleLeavesRewrittenObjects: an object overwritten after the
// rule's decision is not the object the decision was about.
func TestLifecycleLeavesRewrittenObjects(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	put(t, c, b, "k", []byte("old"))
	info, err := srv.layer.Head(ctx, b, "k")
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, b, "k", []byte("new"))
	same := func(cur object.ObjectInfo) bool { return cur.ETag == info.ETag && cur.Mtime == info.Mtime }
	if deleted, err := srv.layer.DeleteIf(ctx, b, "k", same); err != nil || deleted {
		t.Fatalf("DeleteIf on a rewritten object: %v %v", deleted, err)
	}
	if _, started, err := srv.layer.Transition(ctx, b, "k", "STANDARD_IA", same); err != nil || started {
		t.Fatalf("Transition on a rewritten object: %v %v", started, err)
	}
	if got, _ := get(t, c, b, "k"); string(got) != "new" {
		t.Fatal("rewritten object changed")
	}
}
