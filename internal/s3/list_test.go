package s3

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/s3api/utils"
)

// listModel is S3's listing semantics over a sorted key set: keys after
// `after` with the prefix, those containing the delimiter after the prefix
// rolled up into common prefixes (each counting as one entry), maxKeys
// entries per page.
type listModel struct{ keys []string }

type page struct {
	keys, prefixes []string
	truncated      bool
	next           string
}

func (m listModel) page(prefix, delim, after string, maxKeys int) page {
	var p page
	n := 0
	last := ""
	for _, k := range m.keys {
		if k <= after || !strings.HasPrefix(k, prefix) {
			continue
		}
		entry, isPrefix := k, false
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				entry, isPrefix = k[:len(prefix)+i+len(delim)], true
			}
		}
		if isPrefix && (entry == last || entry <= after || strings.HasPrefix(after, entry)) {
			continue
		}
		if n == maxKeys {
			p.truncated = true
			return p
		}
		if isPrefix {
			p.prefixes = append(p.prefixes, entry)
		} else {
			p.keys = append(p.keys, entry)
		}
		last, p.next = entry, entry
		n++
	}
	return p
}

// TestListAgainstModel lists a random key set with every combination of
// prefix, delimiter and page size, through ListObjectsV2 (continuation
// tokens, start-after) and ListObjects (markers), and compares every page
// with the model. The key set comes from a fixed seed; a failure names the
// query.
func TestListAgainstModel(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	const seed = 42
	r := rand.New(rand.NewPCG(seed, 1))
	set := map[string]bool{"a": true, "a/": true, "a//b": true, "a/b/c": true, "b-": true, "z/z/z": true, "é/ü": true}
	alphabet := []string{"a", "b", "c", "/", "-", "é"}
	for len(set) < 150 {
		var sb strings.Builder
		for range 1 + r.IntN(7) {
			sb.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		// versitygw refuses keys that are path-like escapes ("/", "//",
		// "..", "a/../../b"): a documented limitation.
		if k := sb.String(); utils.IsObjectNameValid(k) {
			set[k] = true
		}
	}
	m := listModel{}
	for k := range set {
		m.keys = append(m.keys, k)
	}
	slices.Sort(m.keys)
	var wg sync.WaitGroup
	keys := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: &b, Key: &k, Body: strings.NewReader(k)}); err != nil {
					t.Errorf("put %q: %v", k, err)
				}
			}
		}()
	}
	for _, k := range m.keys {
		keys <- k
	}
	close(keys)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	for _, prefix := range []string{"", "a", "a/", "b/c", "é", "zz"} {
		for _, delim := range []string{"", "/", "-", "b/"} {
			for _, maxKeys := range []int{1, 2, 7, 1000} {
				q := fmt.Sprintf("prefix=%q delimiter=%q max-keys=%d", prefix, delim, maxKeys)
				checkV2(t, ctx, c, b, m, prefix, delim, "", maxKeys, q)
				checkV1(t, ctx, c, b, m, prefix, delim, maxKeys, q)
			}
			// start-after, including a key inside a common prefix.
			for _, sa := range []string{"a", "a/b", "b", "c/"} {
				checkV2(t, ctx, c, b, m, prefix, delim, sa, 3, fmt.Sprintf("prefix=%q delimiter=%q start-after=%q", prefix, delim, sa))
			}
		}
	}
	// max-keys=0: an empty, complete page.
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, MaxKeys: aws.Int32(0)})
	if err != nil || len(out.Contents) != 0 || aws.ToBool(out.IsTruncated) {
		t.Fatalf("max-keys=0: %d objects truncated=%v err=%v", len(out.Contents), aws.ToBool(out.IsTruncated), err)
	}
	_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, ContinuationToken: aws.String("!!not-a-token")})
	wantErr(t, "bad continuation token", err, "InvalidArgument", 400)
}

func checkV2(t *testing.T, ctx context.Context, c *s3.Client, b string, m listModel, prefix, delim, startAfter string, maxKeys int, q string) {
	t.Helper()
	after := startAfter
	var token *string
	for pageNo := 0; ; pageNo++ {
		if pageNo > len(m.keys)+1 {
			t.Fatalf("%s: pagination does not end", q)
		}
		in := &s3.ListObjectsV2Input{Bucket: &b, Prefix: &prefix, Delimiter: &delim, MaxKeys: aws.Int32(int32(maxKeys)), ContinuationToken: token}
		if startAfter != "" {
			in.StartAfter = &startAfter
		}
		out, err := c.ListObjectsV2(ctx, in)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		want := m.page(prefix, delim, after, maxKeys)
		var keys, prefixes []string
		for _, o := range out.Contents {
			keys = append(keys, *o.Key)
			if o.StorageClass != "STANDARD" || o.ETag == nil || o.Size == nil {
				t.Fatalf("%s: entry %+v", q, o)
			}
		}
		for _, p := range out.CommonPrefixes {
			prefixes = append(prefixes, *p.Prefix)
		}
		if !slices.Equal(keys, want.keys) || !slices.Equal(prefixes, want.prefixes) || aws.ToBool(out.IsTruncated) != want.truncated {
			t.Fatalf("%s page %d after %q:\n got keys %q prefixes %q truncated %v\nwant keys %q prefixes %q truncated %v",
				q, pageNo, after, keys, prefixes, aws.ToBool(out.IsTruncated), want.keys, want.prefixes, want.truncated)
		}
		if int(aws.ToInt32(out.KeyCount)) != len(keys)+len(prefixes) {
			t.Fatalf("%s: key count %d", q, aws.ToInt32(out.KeyCount))
		}
		if !want.truncated {
			return
		}
		token, after = out.NextContinuationToken, want.next
	}
}

func checkV1(t *testing.T, ctx context.Context, c *s3.Client, b string, m listModel, prefix, delim string, maxKeys int, q string) {
	t.Helper()
	marker := ""
	for pageNo := 0; ; pageNo++ {
		out, err := c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: &b, Prefix: &prefix, Delimiter: &delim, MaxKeys: aws.Int32(int32(maxKeys)), Marker: &marker})
		if err != nil {
			t.Fatalf("v1 %s: %v", q, err)
		}
		want := m.page(prefix, delim, marker, maxKeys)
		var got []string
		for _, o := range out.Contents {
			got = append(got, *o.Key)
		}
		for _, p := range out.CommonPrefixes {
			got = append(got, *p.Prefix)
		}
		wantAll := append(slices.Clone(want.keys), want.prefixes...)
		if !slices.Equal(got, wantAll) || aws.ToBool(out.IsTruncated) != want.truncated {
			t.Fatalf("v1 %s page %d marker %q: got %q truncated %v, want %q truncated %v",
				q, pageNo, marker, got, aws.ToBool(out.IsTruncated), wantAll, want.truncated)
		}
		if !want.truncated {
			return
		}
		if aws.ToString(out.NextMarker) != want.next {
			t.Fatalf("v1 %s: next marker %q, want %q", q, aws.ToString(out.NextMarker), want.next)
		}
		marker = want.next
	}
}

// TestListHidesDeletedPrefixes pins that a delimiter listing of a
// versioned bucket shows no common prefix whose keys are all deleted (a
// listing of that prefix is empty, as on AWS), and that max-keys pages
// end without a truncated page followed by an empty one.
func TestListHidesDeletedPrefixes(t *testing.T) {
	ctx := context.Background()
	c := client(t, testSecret)
	b := newBucket(t, c)
	if _, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{Bucket: &b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	put(t, c, b, "dir/a", []byte("x"))
	put(t, c, b, "z", []byte("x"))
	put(t, c, b, "zz", []byte("x"))
	for _, k := range []string{"dir/a", "zz"} {
		if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b, Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, Delimiter: aws.String("/")})
	if err != nil {
		t.Fatal(err)
	}
	var prefixes []string
	for _, p := range out.CommonPrefixes {
		prefixes = append(prefixes, aws.ToString(p.Prefix))
	}
	if len(prefixes) != 0 || len(out.Contents) != 1 {
		t.Fatalf("listing: prefixes %v, %d objects; want no prefix and z", prefixes, len(out.Contents))
	}
	out, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &b, Delimiter: aws.String("/"), MaxKeys: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToInt32(out.KeyCount) != 1 || aws.ToString(out.Contents[0].Key) != "z" || aws.ToBool(out.IsTruncated) {
		t.Fatalf("max-keys 1: %d keys, truncated %v; want z alone, not truncated", aws.ToInt32(out.KeyCount), aws.ToBool(out.IsTruncated))
	}
}
