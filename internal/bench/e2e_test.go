package bench

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/terrace-storage/terrace/internal/bench/benchtest"
)

// gateway is the in-process versitygw posix gateway. Its "server" pid is
// this process, which exercises the /proc sampling.
func gateway(t *testing.T) Endpoint {
	t.Helper()
	url, err := benchtest.Gateway()
	if err != nil {
		t.Fatal(err)
	}
	return Endpoint{Name: "vgw", URL: url, Access: benchtest.Access, Secret: benchtest.Secret, Region: DefaultRegion, PID: os.Getpid()}
}

func checkClean(t *testing.T, res *Result) {
	t.Helper()
	for _, o := range res.Ops {
		if o.Errors != 0 || o.VerifyFailures != 0 {
			t.Errorf("%s: %d errors, %d verify failures: %v", o.Op, o.Errors, o.VerifyFailures, o.ErrorSamples)
		}
	}
}

func bucketExists(t *testing.T, ep Endpoint, bucket string) bool {
	t.Helper()
	_, err := newS3Client(ep, 1, false).HeadBucket(context.Background(), &s3.HeadBucketInput{Bucket: aws.String(bucket)})
	return err == nil
}

func TestS3PutThenGetVerified(t *testing.T) {
	ep := gateway(t)
	ctx := context.Background()
	res, err := Run(ctx, ep, Options{
		Workload: Mix{OpPut: 1}, Sizes: MustParseSizeDist("1KiB-64KiB"), Concurrency: 4, Count: 100,
		Bucket: "e2e-put",
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res)
	put := res.Op(OpPut)
	if put == nil || put.Count != 100 || put.Bytes < 100*KiB || put.OpsPerSec <= 0 || put.Latency.P50Ms <= 0 {
		t.Fatalf("put %+v", put)
	}
	if res.Server == nil || res.Server.PeakRSSBytes <= 0 || res.ClientCPUSeconds <= 0 {
		t.Errorf("resource use: server %+v client cpu %v", res.Server, res.ClientCPUSeconds)
	}
	if bucketExists(t, ep, "e2e-put") {
		t.Error("bucket created by the run was not deleted")
	}

	res, err = Run(ctx, ep, Options{
		Workload: Mix{OpGet: 1}, Sizes: MustParseSizeDist("1KiB-64KiB"), Concurrency: 4, Count: 200,
		Objects: 20, Warmup: 100 * time.Millisecond, Bucket: "e2e-get",
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res)
	get := res.Op(OpGet)
	if get.Count != 200 || get.Bytes < 200*KiB || get.MBPerSec <= 0 {
		t.Fatalf("get %+v", get)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, res); err != nil || !strings.HasPrefix(strings.Join(strings.Fields(strings.Split(b.String(), "\n")[1]), " "), "vgw get 200 ") {
		t.Errorf("table:\n%s", b.String())
	}
}

func TestS3MixedWorkload(t *testing.T) {
	ep := gateway(t)
	mix, _ := ParseWorkload("mixed")
	res, err := Run(context.Background(), ep, Options{
		Workload: mix, Sizes: MustParseSizeDist("oltp"), Concurrency: 8, Duration: 700 * time.Millisecond,
		Objects: 32, Bucket: "e2e-mixed", ListMaxKeys: 10,
	})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res)
	for _, op := range AllOps {
		if o := res.Op(op); o == nil || o.Count == 0 {
			t.Errorf("%s: no requests in a mixed run (%+v)", op, o)
		}
	}
	if res.Total.Count < 50 {
		t.Errorf("only %d requests in 700ms", res.Total.Count)
	}
}

func TestS3DetectsCorruption(t *testing.T) {
	ep := gateway(t)
	ctx := context.Background()
	r, err := NewRunner(ep, Options{Workload: Mix{OpGet: 1}, Sizes: MustParseSizeDist("10000"), Concurrency: 2,
		Count: 6, Objects: 1, Bucket: "e2e-corrupt"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Cleanup(ctx)
	res, err := r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res)
	// Overwrite the only object with the right length but one wrong byte.
	key := r.keys.name(r.opts.Prefix, 0)
	body := make([]byte, 10000)
	r.content.Object(key, r.opts.Sizes).ReadAt(body, 0)
	body[5000] ^= 0xff
	if _, err := r.client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("e2e-corrupt"), Key: aws.String(key),
		Body: bytes.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
	res, err = r.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	get := res.Op(OpGet)
	if get.VerifyFailures != 6 || get.Errors != 6 || len(get.ErrorSamples) == 0 ||
		!strings.Contains(get.ErrorSamples[0], "content differs at byte 5000") {
		t.Errorf("corrupted object: %+v", get)
	}
}

func TestS3DeleteStopsWhenKeyspaceEmpty(t *testing.T) {
	ep := gateway(t)
	res, err := Run(context.Background(), ep, Options{Workload: Mix{OpDelete: 1}, Concurrency: 3,
		Duration: 10 * time.Second, Objects: 10, Bucket: "e2e-delete"})
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res)
	if d := res.Op(OpDelete); d.Count != 10 || res.ElapsedSeconds > 5 || len(res.Notes) == 0 {
		t.Errorf("delete run: %+v in %.1fs, notes %v", d, res.ElapsedSeconds, res.Notes)
	}
}

func TestS3BadCredentials(t *testing.T) {
	ep := gateway(t)
	ep.Secret = "wrong"
	_, err := Run(context.Background(), ep, Options{Count: 1, Bucket: "e2e-creds"})
	if err == nil || !strings.Contains(err.Error(), "create bucket e2e-creds") {
		t.Errorf("bad credentials: %v", err)
	}
}

func TestCompareWithStartedTerrace(t *testing.T) {
	vgw := gateway(t)
	// The "terrace" binary is this test binary acting as `terrace server`.
	t.Setenv(benchtest.FakeTerraceEnv, "1")
	ctx := context.Background()
	srv, err := StartTerrace(ctx, TerraceOptions{Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	}()
	tep := srv.Endpoint("terrace")
	if tep.PID == os.Getpid() || tep.PID <= 0 {
		t.Fatalf("server pid %d", tep.PID)
	}
	var runs []string
	cr, err := Compare(ctx, []Endpoint{vgw, tep}, Options{
		Workload: Mix{OpGet: 1}, Sizes: MustParseSizeDist("4KiB"), Concurrency: 4, Count: 80, Objects: 8,
		Bucket: "e2e-compare",
	}, CompareOptions{Rounds: 2, OnRun: func(round int, r *Runner) {
		runs = append(runs, r.Endpoint().Name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(runs, " ") != "vgw terrace vgw terrace" {
		t.Errorf("run order %v, want alternation", runs)
	}
	if len(cr.PerRound) != 2 || len(cr.Endpoints) != 2 || len(cr.Ratios) != 1 || cr.Baseline != "vgw" {
		t.Fatalf("compare result %+v", cr)
	}
	for _, r := range cr.Endpoints {
		checkClean(t, r)
		if r.Op(OpGet).Count != 160 {
			t.Errorf("%s: %d gets over 2 rounds, want 160", r.Endpoint, r.Op(OpGet).Count)
		}
	}
	ts := cr.Endpoints[1].Server
	if ts == nil || ts.PID != tep.PID || ts.PeakRSSBytes <= 0 || ts.CPUSeconds <= 0 {
		t.Errorf("started server stats %+v", ts)
	}
	if ra := cr.Ratios[0]; ra.Endpoint != "terrace" || ra.OpsPerSec <= 0 {
		t.Errorf("ratio %+v", ra)
	}
	var b bytes.Buffer
	if err := WriteCompareTable(&b, cr); err != nil || !strings.Contains(b.String(), "get   terrace") && !strings.Contains(b.String(), "get  terrace") {
		t.Errorf("compare table:\n%s", b.String())
	}
}

func TestCompareErrors(t *testing.T) {
	a := Endpoint{Name: "a", URL: "http://127.0.0.1:1", Access: "k", Secret: "s"}
	b := a
	for _, tc := range []struct {
		eps  []Endpoint
		co   CompareOptions
		want string
	}{
		{[]Endpoint{a}, CompareOptions{}, "at least two endpoints"},
		{[]Endpoint{a, b}, CompareOptions{}, "used twice"},
		{[]Endpoint{a, {Name: "b", URL: a.URL, Access: "k", Secret: "s"}}, CompareOptions{Baseline: "c"}, "baseline \"c\" is not one of"},
		{[]Endpoint{a, {Name: "b", URL: a.URL, Access: "k", Secret: "s"}}, CompareOptions{Rounds: -1}, "rounds -1 out of range"},
	} {
		_, err := Compare(context.Background(), tc.eps, Options{Count: 1}, tc.co)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want %q, got %v", tc.want, err)
		}
	}
}

func TestStartTerraceFailsClearly(t *testing.T) {
	_, err := StartTerrace(context.Background(), TerraceOptions{Binary: "/nonexistent/terrace"})
	if err == nil || !strings.Contains(err.Error(), "bench: start /nonexistent/terrace") {
		t.Errorf("missing binary: %v", err)
	}
	_, err = StartTerrace(context.Background(), TerraceOptions{Binary: "/bin/false"})
	if err == nil || !strings.Contains(err.Error(), "exited during startup") {
		t.Errorf("exiting binary: %v", err)
	}
}

// With ReuseObjects a read run keeps what a --keep run left (same
// prefix, seed and sizes) and writes only what is missing or of another
// size; its GETs verify the reused objects.
func TestS3ReuseKeptObjects(t *testing.T) {
	ep := gateway(t)
	ctx := context.Background()
	o := Options{Workload: Mix{OpGet: 1}, Sizes: MustParseSizeDist("4KiB"), Concurrency: 2, Count: 20,
		Objects: 4, Bucket: "e2e-reuse", KeepObjects: true}
	if _, err := Run(ctx, ep, o); err != nil {
		t.Fatal(err)
	}
	c := newS3Client(ep, 1, false)
	key := func(i int) string { return newKeyspace(4).name("bench/", i) }
	head := func(k string) (time.Time, int64, bool) {
		out, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("e2e-reuse"), Key: aws.String(k)})
		if err != nil {
			return time.Time{}, 0, false
		}
		return *out.LastModified, *out.ContentLength, true
	}
	kept, _, ok := head(key(0))
	if !ok {
		t.Fatal("the --keep run left no objects")
	}
	// One object missing, one of another size.
	if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("e2e-reuse"), Key: aws.String(key(1))}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("e2e-reuse"), Key: aws.String(key(2)),
		Body: strings.NewReader("short"), ContentLength: aws.Int64(5)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // LastModified has one-second resolution
	o.ReuseObjects = true
	res, err := Run(ctx, ep, o)
	if err != nil {
		t.Fatal(err)
	}
	checkClean(t, res) // every GET verified, the reused ones included
	if res.Op(OpGet).Count != 20 {
		t.Fatalf("get %+v", res.Op(OpGet))
	}
	if !strings.Contains(o.String(), "--reuse") {
		t.Errorf("command line %q lacks --reuse", o.String())
	}
	if m, _, _ := head(key(0)); !m.Equal(kept) {
		t.Errorf("key 0 rewritten by a --reuse run (%v, then %v)", kept, m)
	}
	for _, i := range []int{1, 2} {
		if _, size, ok := head(key(i)); !ok || size != 4*KiB {
			t.Errorf("key %d: present %v, %d bytes after the --reuse run; want it written again, 4 KiB", i, ok, size)
		}
	}
}
