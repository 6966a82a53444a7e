package s3

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/object"
)

// listPage lists one page after the given key. maxKeys 0 answers an empty,
// complete page (S3); the layer caps pages at 1000 keys.
// listOwner says whose name listings report as an object's owner (nil:
// none, when FetchOwner is off).
type listOwner func(o object.Record) *types.Owner

func (b *Backend) listPage(ctx context.Context, op, bucket, prefix, delim, after string, maxKeys int32) (object.ListResult, listOwner, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return object.ListResult{}, nil, b.mapErr(op, err, bucket)
	}
	owner := func(o object.Record) *types.Owner {
		id := objectOwner(bk, o)
		return &types.Owner{ID: &id, DisplayName: &id}
	}
	if maxKeys <= 0 {
		return object.ListResult{}, owner, nil
	}
	res, err := b.layer.List(ctx, bucket, object.ListOptions{Prefix: prefix, Delimiter: delim, After: after, MaxKeys: int(maxKeys)})
	if err != nil {
		return object.ListResult{}, nil, b.mapErr(op, err, bucket)
	}
	return res, owner, nil
}

func listEntries(res object.ListResult, owner listOwner) ([]s3response.Object, []types.CommonPrefix) {
	objs := make([]s3response.Object, 0, len(res.Objects))
	for _, oi := range res.Objects {
		etag, key, size, mtime := quoteETag(oi.ETag), oi.Key, listSize(oi.Object), lastModified(oi.Object)
		var ow *types.Owner
		if owner != nil {
			ow = owner(oi.Object)
		}
		objs = append(objs, s3response.Object{
			ETag: &etag, Key: &key, Size: &size, LastModified: &mtime, Owner: ow,
			StorageClass: types.ObjectStorageClass(storageClass(oi.Object)),
		})
	}
	cps := make([]types.CommonPrefix, 0, len(res.CommonPrefixes))
	for _, p := range res.CommonPrefixes {
		cps = append(cps, types.CommonPrefix{Prefix: &p})
	}
	return objs, cps
}

// encodeEntries applies EncodingType=url to keys and common prefixes.
func encodeEntries(enc bool, objs []s3response.Object, cps []types.CommonPrefix) {
	if !enc {
		return
	}
	for i := range objs {
		objs[i].Key = encodePtr(true, objs[i].Key)
	}
	for i := range cps {
		cps[i].Prefix = encodePtr(true, cps[i].Prefix)
	}
}

// ListObjects is ListObjects (v1): marker pagination, NextMarker when
// truncated.
func (b *Backend) ListObjects(ctx context.Context, in *s3.ListObjectsInput) (s3response.ListObjectsResult, error) {
	bucket, prefix, delim, marker := deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter), deref(in.Marker)
	enc, err := listEncoding(ctx)
	if err != nil {
		return s3response.ListObjectsResult{}, err
	}
	maxKeys := int32(1000)
	if in.MaxKeys != nil {
		maxKeys = *in.MaxKeys
	}
	res, owner, err := b.listPage(ctx, "ListObjects", bucket, prefix, delim, marker, maxKeys)
	if err != nil {
		return s3response.ListObjectsResult{}, err
	}
	objs, cps := listEntries(res, owner)
	encodeEntries(enc, objs, cps)
	truncated := res.Truncated
	out := s3response.ListObjectsResult{
		Name: &bucket, Prefix: encodePtr(enc, &prefix), Marker: encodePtr(enc, &marker), MaxKeys: &maxKeys, IsTruncated: &truncated,
		Delimiter: encodePtr(enc, backend.GetPtrFromString(delim)), Contents: objs, CommonPrefixes: cps,
	}
	if enc {
		out.EncodingType = types.EncodingTypeUrl
	}
	if truncated {
		out.NextMarker = encodePtr(enc, backend.GetPtrFromString(res.NextAfter))
	}
	return out, nil
}

// ListObjectsV2 is ListObjects v2: opaque continuation tokens (the key to
// continue after, encoded), StartAfter, KeyCount.
func (b *Backend) ListObjectsV2(ctx context.Context, in *s3.ListObjectsV2Input) (s3response.ListObjectsV2Result, error) {
	bucket, prefix, delim := deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter)
	token, startAfter := deref(in.ContinuationToken), deref(in.StartAfter)
	after, err := decodeToken(token)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	enc, err := listEncoding(ctx)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	after = max(after, startAfter)
	maxKeys := int32(1000)
	if in.MaxKeys != nil {
		maxKeys = *in.MaxKeys
	}
	res, owner, err := b.listPage(ctx, "ListObjectsV2", bucket, prefix, delim, after, maxKeys)
	if err != nil {
		return s3response.ListObjectsV2Result{}, err
	}
	if in.FetchOwner == nil || !*in.FetchOwner {
		owner = nil
	}
	objs, cps := listEntries(res, owner)
	encodeEntries(enc, objs, cps)
	truncated := res.Truncated
	count := int32(len(objs) + len(cps))
	out := s3response.ListObjectsV2Result{
		Name: &bucket, Prefix: encodePtr(enc, &prefix), MaxKeys: &maxKeys, KeyCount: &count, IsTruncated: &truncated,
		Delimiter: encodePtr(enc, backend.GetPtrFromString(delim)), ContinuationToken: backend.GetPtrFromString(token),
		StartAfter: encodePtr(enc, backend.GetPtrFromString(startAfter)), Contents: objs, CommonPrefixes: cps,
	}
	if hasQuery(ctx, "continuation-token") {
		// An empty token is echoed as sent (AWS; conformance suites
		// check <ContinuationToken></ContinuationToken>).
		out.ContinuationToken = &token
	}
	if enc {
		out.EncodingType = types.EncodingTypeUrl
	}
	if truncated {
		out.NextContinuationToken = backend.GetPtrFromString(encodeToken(res.NextAfter))
	}
	return out, nil
}

// ListObjectVersions lists every version and delete marker, newest first
// within a key; objects written before versioning was enabled are their
// "null" version, and a never-versioned bucket lists each object as that.
func (b *Backend) ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput) (s3response.ListVersionsResult, error) {
	bucket, prefix, delim, keyMarker := deref(in.Bucket), deref(in.Prefix), deref(in.Delimiter), deref(in.KeyMarker)
	maxKeys := int32(1000)
	if in.MaxKeys != nil {
		maxKeys = *in.MaxKeys
	}
	enc, err := listEncoding(ctx)
	if err != nil {
		return s3response.ListVersionsResult{}, err
	}
	if err := checkVersion(in.VersionIdMarker); err != nil {
		return s3response.ListVersionsResult{}, err
	}
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return s3response.ListVersionsResult{}, b.mapErr("ListObjectVersions", err, bucket)
	}
	out := s3response.ListVersionsResult{
		Name: &bucket, Prefix: encodePtr(enc, &prefix), KeyMarker: encodePtr(enc, &keyMarker), MaxKeys: &maxKeys,
		Delimiter: encodePtr(enc, backend.GetPtrFromString(delim)), VersionIdMarker: in.VersionIdMarker,
		Versions: []s3response.ObjectVersion{}, CommonPrefixes: []types.CommonPrefix{},
	}
	if enc {
		out.EncodingType = types.EncodingTypeUrl
	}
	truncated := false
	out.IsTruncated = &truncated
	if maxKeys <= 0 {
		return out, nil
	}
	res, err := b.layer.ListVersions(ctx, bucket, object.VersionListOptions{Prefix: prefix, Delimiter: delim,
		KeyMarker: keyMarker, VersionMarker: deref(in.VersionIdMarker), MaxKeys: int(maxKeys)})
	if err != nil {
		return s3response.ListVersionsResult{}, b.mapErr("ListObjectVersions", err, bucket)
	}
	for _, v := range res.Versions {
		key, vid, latest, mtime := v.Key, v.VersionID, v.IsLatest, lastModified(v.Object)
		if enc {
			key = urlEncode(key)
		}
		id := objectOwner(bk, v.Object)
		owner := &types.Owner{ID: &id, DisplayName: &id}
		if v.DeleteMarker {
			out.DeleteMarkers = append(out.DeleteMarkers, types.DeleteMarkerEntry{Key: &key, VersionId: &vid, IsLatest: &latest, LastModified: &mtime, Owner: owner})
			continue
		}
		etag, size := quoteETag(v.ETag), listSize(v.Object)
		out.Versions = append(out.Versions, s3response.ObjectVersion{ETag: &etag, Key: &key, Size: &size, LastModified: &mtime,
			Owner: owner, IsLatest: &latest, VersionId: &vid, StorageClass: types.ObjectVersionStorageClass(storageClass(v.Object))})
	}
	for _, p := range res.CommonPrefixes {
		p := p
		if enc {
			p = urlEncode(p)
		}
		out.CommonPrefixes = append(out.CommonPrefixes, types.CommonPrefix{Prefix: &p})
	}
	truncated = res.Truncated
	if truncated {
		next, vid := res.NextKeyMarker, res.NextVersionMarker
		out.NextKeyMarker, out.NextVersionIdMarker = encodePtr(enc, &next), &vid
	}
	return out, nil
}
