package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/backend"
	"github.com/versity/versitygw/s3err"
	"github.com/versity/versitygw/s3response"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
)

// BackendOptions configure a Backend. Zero values mean defaults.
type BackendOptions struct {
	// Logger receives internal errors (answered to clients as
	// InternalError without detail). Default slog.Default().
	Logger *slog.Logger
	// MaxDeleteObjects bounds the keys of one DeleteObjects request. S3's
	// limit is 1000; versitygw does not enforce it.
	MaxDeleteObjects int
	// Keys is the cluster's master keyring, which seals SSE-S3 data keys.
	// Without it SSE-S3 requests answer NotImplemented.
	Keys *sse.Keyring
	// SpoolDir holds (unlinked, encrypted) bodies of uploads sent without
	// Content-Length while they are stored. Default os.TempDir().
	SpoolDir string
	// MaxSpoolBytes bounds the bytes of such bodies spooled at once on
	// this node (all uploads together): an upload that does not fit in
	// what is left is answered 503 SlowDown, one larger than the whole
	// budget 400 EntityTooLarge. Default DefaultMaxSpoolBytes; negative
	// turns spooling off (such uploads get versitygw's 411
	// MissingContentLength).
	MaxSpoolBytes int64
}

// DefaultMaxSpoolBytes is BackendOptions.MaxSpoolBytes' default: one
// upload of S3's single-PUT limit.
const DefaultMaxSpoolBytes = maxSpoolBytes

// EnsureDefaults fills zero fields.
func (o *BackendOptions) EnsureDefaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxDeleteObjects == 0 {
		o.MaxDeleteObjects = 1000
	}
	if o.MaxSpoolBytes == 0 {
		o.MaxSpoolBytes = DefaultMaxSpoolBytes
	}
}

// String prints the options for logs.
func (o BackendOptions) String() string {
	return fmt.Sprintf("max_delete_objects=%d max_spool_bytes=%d", o.MaxDeleteObjects, o.MaxSpoolBytes)
}

// Backend implements versitygw's backend.Backend over the object layer.
// Operations it does not support (object lock, ACLs on objects, versioning,
// S3 Select, restore) answer NotImplemented through the embedded
// BackendUnsupported.
type Backend struct {
	backend.BackendUnsupported
	layer *object.Layer
	opts  BackendOptions
	log   *slog.Logger
	// iam and rootUser are set by Serve: grantee checks of object ACLs,
	// the owner of buckets without an ACL.
	iam      auth.IAMService
	rootUser string
	// virtualDomain is Serve's ServeConfig.VirtualDomain: Terrace's
	// middlewares resolve virtual-hosted requests with it (requestTarget).
	virtualDomain string
	// spoolBudget bounds the bytes spooled at once (MaxSpoolBytes).
	spoolBudget *spoolBudget
	// afterCopyHead, when set (tests only), is called by CopyObject and
	// UploadPartCopy between reading the source's record and copying it.
	afterCopyHead atomic.Pointer[func(bucket, key string)]
}

// copySourceRead runs the afterCopyHead test hook.
func (b *Backend) copySourceRead(bucket, key string) {
	if f := b.afterCopyHead.Load(); f != nil {
		(*f)(bucket, key)
	}
}

// copyAttempts bounds how often a copy whose source changed between the
// read of its record and the copy is retried (read again, judged again)
// before it answers 409.
const copyAttempts = 3

var _ backend.Backend = (*Backend)(nil)

// NewBackend returns a backend over l.
func NewBackend(l *object.Layer, opts BackendOptions) *Backend {
	opts.EnsureDefaults()
	return &Backend{layer: l, opts: opts, log: opts.Logger, spoolBudget: &spoolBudget{limit: opts.MaxSpoolBytes}}
}

// String names the backend in versitygw's logs.
func (b *Backend) String() string { return "terrace" }

// Shutdown is called by the gateway when it stops. The layer belongs to
// the caller, who closes it.
func (b *Backend) Shutdown() {}

// NormalizeObjectKey returns the key unchanged: keys are opaque strings
// (no path semantics).
func (b *Backend) NormalizeObjectKey(_, object string) string { return object }

// Keys of the opaque S3 sub-resources kept in object.BucketRecord.Attrs.
const (
	attrACL       = "s3.acl"
	attrPolicy    = "s3.policy"
	attrOwnership = "s3.ownership"
	attrCORS      = "s3.cors"
	attrWebsite   = "s3.website"
	attrTagging   = "s3.tagging"
)

// accountOf returns the account versitygw authenticated for the request,
// if any (it stores it in the request's user values).
func accountOf(ctx context.Context, key string) auth.Account {
	a, _ := ctx.Value(key).(auth.Account)
	return a
}

// bucketOwner is a bucket's owner: the ACL's owner, else the record's.
func bucketOwner(b object.BucketRecord) string {
	if acl, err := auth.ParseACL(b.Attrs[attrACL]); err == nil && acl.Owner != "" {
		return acl.Owner
	}
	return b.Owner
}

// ListBuckets lists buckets in name order: all of them for admins, else the
// requester's.
func (b *Backend) ListBuckets(ctx context.Context, in s3response.ListBucketsInput) (s3response.ListAllMyBucketsResult, error) {
	all, err := b.layer.ListBuckets(ctx)
	if err != nil {
		return s3response.ListAllMyBucketsResult{}, b.mapErr("ListBuckets", err, "")
	}
	out := s3response.ListAllMyBucketsResult{Owner: s3response.CanonicalUser{ID: in.Owner, DisplayName: in.Owner}, Prefix: in.Prefix}
	for _, bk := range all {
		if !strings.HasPrefix(bk.Name, in.Prefix) || bk.Name <= in.ContinuationToken {
			continue
		}
		if !in.IsAdmin && bucketOwner(bk) != in.Owner {
			continue
		}
		if in.MaxBuckets > 0 && len(out.Buckets.Bucket) == int(in.MaxBuckets) {
			out.ContinuationToken = out.Buckets.Bucket[len(out.Buckets.Bucket)-1].Name
			break
		}
		out.Buckets.Bucket = append(out.Buckets.Bucket, s3response.ListAllMyBucketsEntry{
			Name: bk.Name, CreationDate: time.Unix(0, bk.Created).UTC(),
		})
	}
	return out, nil
}

// ListBucketsAndOwners serves versitygw's admin API.
func (b *Backend) ListBucketsAndOwners(ctx context.Context) ([]s3response.Bucket, error) {
	all, err := b.layer.ListBuckets(ctx)
	if err != nil {
		return nil, b.mapErr("ListBucketsAndOwners", err, "")
	}
	out := make([]s3response.Bucket, 0, len(all))
	for _, bk := range all {
		out = append(out, s3response.Bucket{Name: bk.Name, Owner: bucketOwner(bk)})
	}
	return out, nil
}

// ChangeBucketOwner serves versitygw's admin API. The old owner's ACL
// grants (the FULL_CONTROL every bucket's creator gets, and any other)
// become the new owner's: the previous owner keeps no access through them,
// and its name is no longer held by the bucket.
func (b *Backend) ChangeBucketOwner(ctx context.Context, bucket, owner string) error {
	err := b.layer.UpdateBucket(ctx, bucket, func(bk *object.BucketRecord) error {
		acl, err := auth.ParseACL(bk.Attrs[attrACL])
		if err != nil {
			return err
		}
		if old := bucketOwner(*bk); old != "" && old != owner {
			grantees := acl.Grantees[:0]
			for _, g := range acl.Grantees {
				if g.Access == old {
					g.Access = owner
				}
				if !slices.Contains(grantees, g) {
					grantees = append(grantees, g)
				}
			}
			acl.Grantees = grantees
		}
		acl.Owner = owner
		raw, err := json.Marshal(acl)
		if err != nil {
			return err
		}
		setAttr(bk, attrACL, raw)
		bk.Owner = owner
		return nil
	})
	return b.mapErr("ChangeBucketOwner", err, bucket)
}

// HeadBucket reports whether a bucket exists.
func (b *Backend) HeadBucket(ctx context.Context, in *s3.HeadBucketInput) (*s3.HeadBucketOutput, error) {
	if _, _, err := b.layer.GetBucket(ctx, *in.Bucket); err != nil {
		return nil, b.mapErr("HeadBucket", err, *in.Bucket)
	}
	return &s3.HeadBucketOutput{}, nil
}

// CreateBucket creates a bucket with the cluster's default vector (the
// admin API sets per-bucket vectors). Creating an existing bucket is
// BucketAlreadyOwnedByYou for its owner, else BucketAlreadyExists.
func (b *Backend) CreateBucket(ctx context.Context, in *s3.CreateBucketInput, acl []byte) error {
	bucket := *in.Bucket
	if !validBucketName(bucket) {
		return s3err.GetBucketErr(s3err.ErrInvalidBucketName, bucket)
	}
	owner := accountOf(ctx, "bucket-owner").Access
	if in.ObjectLockEnabledForBucket != nil && *in.ObjectLockEnabledForBucket {
		return errObjectLockUnsupported
	}
	var tags map[string]string
	if in.CreateBucketConfiguration != nil {
		var err error
		if tags, err = backend.ParseCreateBucketTags(in.CreateBucketConfiguration.Tags); err != nil {
			return err
		}
	}
	err := b.layer.CreateBucket(ctx, bucket, owner, model.Vector{})
	if errors.Is(err, object.ErrBucketExists) {
		bk, _, gerr := b.layer.GetBucket(ctx, bucket)
		if gerr != nil {
			return b.mapErr("CreateBucket", gerr, bucket)
		}
		if o := bucketOwner(bk); o == "" || o == owner {
			return s3err.GetBucketErr(s3err.ErrBucketAlreadyOwnedByYou, bucket)
		}
		return s3err.GetBucketErr(s3err.ErrBucketAlreadyExists, bucket)
	}
	if err != nil {
		return b.mapErr("CreateBucket", err, bucket)
	}
	// The record exists; attach the sub-resources. A crash in between
	// leaves a bucket without ACL, which versitygw treats as owned by the
	// root account.
	if acl, err = normalizeACL(acl); err != nil {
		return err
	}
	err = b.layer.UpdateBucket(ctx, bucket, func(bk *object.BucketRecord) error {
		setAttr(bk, attrACL, acl)
		setAttr(bk, attrOwnership, []byte(in.ObjectOwnership))
		if tags != nil {
			raw, err := json.Marshal(tags)
			if err != nil {
				return err
			}
			setAttr(bk, attrTagging, raw)
		}
		return nil
	})
	return b.mapErr("CreateBucket", err, bucket)
}

// DeleteBucket deletes an empty bucket (BucketNotEmpty otherwise).
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	return b.mapErr("DeleteBucket", b.layer.DeleteBucket(ctx, bucket), bucket)
}

// GetBucketVersioning reports the bucket's versioning state (an empty
// configuration for a never-versioned bucket, as AWS answers).
func (b *Backend) GetBucketVersioning(ctx context.Context, bucket string) (s3response.GetBucketVersioningOutput, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return s3response.GetBucketVersioningOutput{}, b.mapErr("GetBucketVersioning", err, bucket)
	}
	var out s3response.GetBucketVersioningOutput
	if bk.Versioning != object.VersioningOff {
		st := types.BucketVersioningStatus(bk.Versioning)
		out.Status = &st
	}
	return out, nil
}

// PutBucketVersioning enables or suspends versioning.
func (b *Backend) PutBucketVersioning(ctx context.Context, bucket string, status types.BucketVersioningStatus) error {
	if mfaDeleteRequested(ctx) {
		return errMFADeleteUnsupported
	}
	return b.mapErr("PutBucketVersioning", b.layer.SetVersioning(ctx, bucket, string(status)), bucket)
}

// errMFADeleteUnsupported answers a versioning configuration that enables
// MFA delete, which versitygw would otherwise drop.
var errMFADeleteUnsupported = s3err.APIError{
	Code:           "NotImplemented",
	Description:    "MFA Delete is not supported.",
	HTTPStatusCode: http.StatusNotImplemented,
}

// mfaDeleteRequested reports whether a PutBucketVersioning request's
// configuration (which versitygw parses only for its Status) sets
// MfaDelete to Enabled.
func mfaDeleteRequested(ctx context.Context) bool {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil {
		return false
	}
	var conf struct {
		MfaDelete string `xml:"MfaDelete"`
	}
	if xml.Unmarshal(rc.Request.Body(), &conf) != nil {
		return false
	}
	return strings.EqualFold(strings.TrimSpace(conf.MfaDelete), string(types.MFADeleteEnabled))
}

// GetObjectLockConfiguration reports that no bucket has object lock, which
// is what versitygw's authorization checks ask before every write.
func (b *Backend) GetObjectLockConfiguration(ctx context.Context, bucket string) ([]byte, error) {
	if _, _, err := b.layer.GetBucket(ctx, bucket); err != nil {
		return nil, b.mapErr("GetObjectLockConfiguration", err, bucket)
	}
	return nil, s3err.GetAPIError(s3err.ErrObjectLockConfigurationNotFound)
}

func setAttr(bk *object.BucketRecord, key string, val []byte) {
	if len(val) == 0 {
		delete(bk.Attrs, key)
		return
	}
	if bk.Attrs == nil {
		bk.Attrs = map[string][]byte{}
	}
	bk.Attrs[key] = slices.Clone(val)
}

// getAttr returns a bucket sub-resource; missing is the error versitygw
// expects for an absent configuration (nil: an empty value).
func (b *Backend) getAttr(ctx context.Context, op, bucket, key string, missing error) ([]byte, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return nil, b.mapErr(op, err, bucket)
	}
	v, ok := bk.Attrs[key]
	if !ok {
		if missing != nil {
			return nil, missing
		}
		return []byte{}, nil
	}
	return v, nil
}

// putAttr stores (val non-empty) or deletes a bucket sub-resource.
func (b *Backend) putAttr(ctx context.Context, op, bucket, key string, val []byte) error {
	err := b.layer.UpdateBucket(ctx, bucket, func(bk *object.BucketRecord) error {
		setAttr(bk, key, val)
		return nil
	})
	return b.mapErr(op, err, bucket)
}

// GetBucketAcl returns the stored ACL (empty: owned by root, no grants).
// A BucketOwnerEnforced bucket's ACL grants only its owner: grants to
// anyone else (stored before the switch was refused for them) are left
// out, so that versitygw, which authorizes from this answer, never
// honours them. An anonymous request to a bucket with IgnorePublicAcls
// (or a signed request there) gets the ACL without its public grants
// (publicAccessGate).
func (b *Backend) GetBucketAcl(ctx context.Context, in *s3.GetBucketAclInput) ([]byte, error) {
	return b.bucketACL(ctx, *in.Bucket, ignoringPublicACLs(ctx))
}

// bucketACL is GetBucketAcl's answer, without the public grants when
// ignorePublic.
func (b *Backend) bucketACL(ctx context.Context, bucket string, ignorePublic bool) ([]byte, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return nil, b.mapErr("GetBucketAcl", err, bucket)
	}
	raw := bk.Attrs[attrACL]
	if len(raw) > 0 && ignorePublic {
		if raw, err = withoutPublicGrants(raw); err != nil {
			return nil, b.mapErr("GetBucketAcl", err, bucket)
		}
	}
	if !ownerEnforced(bk) || !aclGrantsOthers(raw, bucketOwner(bk)) {
		return raw, nil
	}
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return nil, b.mapErr("GetBucketAcl", err, bucket)
	}
	owner := bucketOwner(bk)
	grantees := []auth.Grantee{}
	for _, g := range acl.Grantees {
		if g.Type != types.TypeGroup && g.Access == owner {
			grantees = append(grantees, g)
		}
	}
	acl.Grantees = grantees
	return json.Marshal(acl)
}

// ownerEnforced reports whether a bucket's ownership controls are
// explicitly BucketOwnerEnforced (what makes versitygw refuse ACLs).
func ownerEnforced(bk object.BucketRecord) bool {
	return types.ObjectOwnership(bk.Attrs[attrOwnership]) == types.ObjectOwnershipBucketOwnerEnforced
}

// aclGrantsOthers reports whether a bucket ACL (auth.ACL JSON) grants
// anything to anyone but owner. An unparsable ACL counts as granting.
func aclGrantsOthers(raw []byte, owner string) bool {
	if len(raw) == 0 {
		return false
	}
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return true
	}
	for _, g := range acl.Grantees {
		if g.Type == types.TypeGroup || g.Access != owner {
			return true
		}
	}
	return false
}

var errACLWithEnforcedOwnership = s3err.GetAPIError(s3err.ErrInvalidBucketAclWithObjectOwnership)

// PutBucketAcl stores an ACL (grantees in AWS's syntax normalized to
// identities). versitygw refuses ACLs on BucketOwnerEnforced buckets; the
// refusal is made again here, with the write, against a concurrent switch.
func (b *Backend) PutBucketAcl(ctx context.Context, bucket string, data []byte) error {
	data, err := normalizeACL(data)
	if err != nil {
		return err
	}
	if err := b.checkPublicACL(ctx, bucket, data); err != nil {
		return err
	}
	err = b.layer.UpdateBucket(ctx, bucket, func(bk *object.BucketRecord) error {
		if ownerEnforced(*bk) && aclGrantsOthers(data, bucketOwner(*bk)) {
			return errACLNotSupported
		}
		setAttr(bk, attrACL, data)
		return nil
	})
	return b.mapErr("PutBucketAcl", err, bucket)
}

// PutBucketPolicy stores a bucket policy (versitygw validated it); a
// public one is refused when the bucket's public access block says so.
func (b *Backend) PutBucketPolicy(ctx context.Context, bucket string, policy []byte) error {
	if policyIsPublic(policy) {
		p, err := b.bucketPAB(ctx, bucket)
		if err != nil {
			return err
		}
		if p.BlockPublicPolicy {
			return errPublicBlocked
		}
	}
	return b.putAttr(ctx, "PutBucketPolicy", bucket, attrPolicy, policy)
}

// GetBucketPolicy returns the bucket policy or NoSuchBucketPolicy. A
// snapshot's read-only bucket answers with its source bucket's policy,
// its resources renamed to the snapshot's bucket (snapshotPolicy): this is
// also the policy versitygw authorizes requests on the snapshot with.
func (b *Backend) GetBucketPolicy(ctx context.Context, bucket string) ([]byte, error) {
	raw, err := b.getAttr(ctx, "GetBucketPolicy", bucket, attrPolicy, s3err.GetAPIError(s3err.ErrNoSuchBucketPolicy))
	if err != nil {
		return nil, err
	}
	if base, _, ok := object.SnapshotOf(bucket); ok {
		if raw, err = snapshotPolicy(raw, base, bucket); err != nil {
			b.log.Error("GetBucketPolicy: a snapshot's policy", "bucket", bucket, "err", err)
			return nil, s3err.GetAPIError(s3err.ErrInternalError)
		}
	}
	return raw, nil
}

// DeleteBucketPolicy removes the bucket policy.
func (b *Backend) DeleteBucketPolicy(ctx context.Context, bucket string) error {
	return b.putAttr(ctx, "DeleteBucketPolicy", bucket, attrPolicy, nil)
}

// PutBucketOwnershipControls stores the object-ownership setting. As on
// AWS, a bucket whose ACL grants anyone but its owner is not switched to
// BucketOwnerEnforced (which disables ACLs): InvalidBucketAclWithObjectOwnership
// until the ACL is made private.
func (b *Backend) PutBucketOwnershipControls(ctx context.Context, bucket string, o types.ObjectOwnership) error {
	err := b.layer.UpdateBucket(ctx, bucket, func(bk *object.BucketRecord) error {
		if o == types.ObjectOwnershipBucketOwnerEnforced && aclGrantsOthers(bk.Attrs[attrACL], bucketOwner(*bk)) {
			return errACLWithEnforcedOwnership
		}
		setAttr(bk, attrOwnership, []byte(o))
		return nil
	})
	return b.mapErr("PutBucketOwnershipControls", err, bucket)
}

// GetBucketOwnershipControls returns the object-ownership setting.
func (b *Backend) GetBucketOwnershipControls(ctx context.Context, bucket string) (types.ObjectOwnership, error) {
	v, err := b.getAttr(ctx, "GetBucketOwnershipControls", bucket, attrOwnership,
		s3err.GetBucketErr(s3err.ErrOwnershipControlsNotFound, bucket))
	return types.ObjectOwnership(v), err
}

// DeleteBucketOwnershipControls removes the object-ownership setting.
func (b *Backend) DeleteBucketOwnershipControls(ctx context.Context, bucket string) error {
	return b.putAttr(ctx, "DeleteBucketOwnershipControls", bucket, attrOwnership, nil)
}

// PutBucketCors stores a CORS configuration (versitygw applies it).
func (b *Backend) PutBucketCors(ctx context.Context, bucket string, cors []byte) error {
	return b.putAttr(ctx, "PutBucketCors", bucket, attrCORS, cors)
}

// GetBucketCors returns the CORS configuration.
func (b *Backend) GetBucketCors(ctx context.Context, bucket string) ([]byte, error) {
	return b.getAttr(ctx, "GetBucketCors", bucket, attrCORS, s3err.GetAPIError(s3err.ErrNoSuchCORSConfiguration))
}

// DeleteBucketCors removes the CORS configuration.
func (b *Backend) DeleteBucketCors(ctx context.Context, bucket string) error {
	return b.putAttr(ctx, "DeleteBucketCors", bucket, attrCORS, nil)
}

// PutBucketWebsite stores a website configuration.
func (b *Backend) PutBucketWebsite(ctx context.Context, bucket string, website []byte) error {
	return b.putAttr(ctx, "PutBucketWebsite", bucket, attrWebsite, website)
}

// GetBucketWebsite returns the website configuration.
func (b *Backend) GetBucketWebsite(ctx context.Context, bucket string) ([]byte, error) {
	return b.getAttr(ctx, "GetBucketWebsite", bucket, attrWebsite, s3err.GetAPIError(s3err.ErrNoSuchWebsiteConfiguration))
}

// DeleteBucketWebsite removes the website configuration.
func (b *Backend) DeleteBucketWebsite(ctx context.Context, bucket string) error {
	return b.putAttr(ctx, "DeleteBucketWebsite", bucket, attrWebsite, nil)
}

// PutBucketTagging stores bucket tags (nil tags delete them).
func (b *Backend) PutBucketTagging(ctx context.Context, bucket string, tags map[string]string) error {
	var raw []byte
	if len(tags) > 0 {
		var err error
		if raw, err = json.Marshal(tags); err != nil {
			return err
		}
	}
	return b.putAttr(ctx, "PutBucketTagging", bucket, attrTagging, raw)
}

// GetBucketTagging returns bucket tags or NoSuchTagSet.
func (b *Backend) GetBucketTagging(ctx context.Context, bucket string) (map[string]string, error) {
	raw, err := b.getAttr(ctx, "GetBucketTagging", bucket, attrTagging,
		s3err.GetBucketErr(s3err.ErrBucketTaggingNotFound, bucket))
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	if err := json.Unmarshal(raw, &tags); err != nil {
		return nil, b.mapErr("GetBucketTagging", fmt.Errorf("s3: corrupt bucket tags: %w", err), bucket)
	}
	return tags, nil
}

// DeleteBucketTagging removes bucket tags.
func (b *Backend) DeleteBucketTagging(ctx context.Context, bucket string) error {
	return b.PutBucketTagging(ctx, bucket, nil)
}

// ownerOf returns a bucket's owner (the root account for a bucket without
// one recorded, "" for a bucket that does not exist).
func (b *Backend) ownerOf(ctx context.Context, bucket string) (string, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if errors.Is(err, object.ErrNoSuchBucket) {
		return "", nil
	}
	if err != nil {
		return "", b.mapErr("BucketOwner", err, bucket)
	}
	if o := bucketOwner(bk); o != "" {
		return o, nil
	}
	return b.rootUser, nil
}
