package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/metrics"
	"github.com/versity/versitygw/s3api/controllers"
	"github.com/versity/versitygw/s3err"
)

// Public access block (versitygw answers it NotImplemented) and the
// refusal of object lock, which needs versioning Terrace does not have.

const attrPublicAccessBlock = "s3.public-access-block"

// publicAccessBlock is a bucket's PublicAccessBlockConfiguration.
type publicAccessBlock struct {
	BlockPublicAcls       bool `xml:"BlockPublicAcls" json:"block_acls"`
	IgnorePublicAcls      bool `xml:"IgnorePublicAcls" json:"ignore_acls"`
	BlockPublicPolicy     bool `xml:"BlockPublicPolicy" json:"block_policy"`
	RestrictPublicBuckets bool `xml:"RestrictPublicBuckets" json:"restrict"`
}

var (
	errNoPublicAccessBlock = s3err.APIError{Code: "NoSuchPublicAccessBlockConfiguration",
		Description: "The public access block configuration was not found", HTTPStatusCode: http.StatusNotFound}
	errPublicBlocked = s3err.APIError{Code: "AccessDenied",
		Description: "Access Denied: the bucket's public access block forbids public ACLs and policies", HTTPStatusCode: http.StatusForbidden}
	// errObjectLockUnsupported answers every object-lock write.
	errObjectLockUnsupported = s3err.APIError{Code: "NotImplemented",
		Description:    "Object Lock (retention and legal hold) is not supported.",
		HTTPStatusCode: http.StatusNotImplemented}
)

// bucketPAB returns a bucket's public access block (zero if none).
func (b *Backend) bucketPAB(ctx context.Context, bucket string) (publicAccessBlock, error) {
	raw, err := b.getAttr(ctx, "PublicAccessBlock", bucket, attrPublicAccessBlock, nil)
	var p publicAccessBlock
	if err != nil || len(raw) == 0 {
		return p, err
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return p, b.mapErr("PublicAccessBlock", err, bucket)
	}
	return p, nil
}

// aclIsPublic reports whether an ACL (auth.ACL JSON) grants anything to
// everyone.
func aclIsPublic(raw []byte) bool {
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return false
	}
	for _, g := range acl.Grantees {
		if g.Type == "Group" && (g.Access == allUsersID || g.Access == authUsersID) {
			return true
		}
	}
	return false
}

// policyIsPublic reports whether a bucket policy has an Allow statement
// for anyone: Principal "*", {"AWS": "*"} or a list naming "*". It
// decides from the policy as versitygw parses it, so whitespace and JSON
// escapes make no difference. An unparsable policy is not public (versitygw
// refuses it before it is stored).
func policyIsPublic(raw []byte) bool {
	doc, err := auth.ParsePolicyDocument(raw)
	if err != nil {
		return false
	}
	for _, s := range doc.Statement {
		if s.Effect != auth.BucketPolicyAccessTypeAllow {
			continue
		}
		if _, ok := s.Principals["*"]; ok {
			return true
		}
	}
	return false
}

// checkPublicACL refuses a public ACL on a bucket that blocks them.
func (b *Backend) checkPublicACL(ctx context.Context, bucket string, raw []byte) error {
	if !aclIsPublic(raw) {
		return nil
	}
	p, err := b.bucketPAB(ctx, bucket)
	if err != nil {
		return err
	}
	if p.BlockPublicAcls {
		return errPublicBlocked
	}
	return nil
}

// localIgnorePublicACLs marks a request to a bucket with IgnorePublicAcls
// (a fiber local, which the request's context.Context answers too):
// GetBucketAcl answers it without the public grants, which is what
// versitygw then authorizes the request with. The ACL document a GET
// ?acl returns is read without the mark (aclResponses): the block hides
// public grants from authorization, it does not delete them.
const localIgnorePublicACLs = "terrace-ignore-public-acls"

// ignoringPublicACLs reports whether ctx is such a request's.
func ignoringPublicACLs(ctx context.Context) bool {
	v, _ := ctx.Value(localIgnorePublicACLs).(bool)
	return v
}

// withoutPublicGrants returns an ACL (auth.ACL JSON) without its grants to
// groups (AllUsers, AuthenticatedUsers).
func withoutPublicGrants(raw []byte) ([]byte, error) {
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return nil, err
	}
	grantees := []auth.Grantee{}
	for _, g := range acl.Grantees {
		if g.Type != types.TypeGroup {
			grantees = append(grantees, g)
		}
	}
	acl.Grantees = grantees
	return json.Marshal(acl)
}

// publicAccessGate applies the bucket's public access block before
// versitygw grants a request through a public ACL or policy. Anonymous
// requests: RestrictPublicBuckets refuses all of them; IgnorePublicAcls
// refuses them all when the bucket policy is not public, and otherwise
// marks the request so that versitygw decides it from the policy alone.
// Signed requests: IgnorePublicAcls marks them too, so that a grant to
// AllUsers or AuthenticatedUsers lets no signed-in user in either (AWS
// ignores public ACLs for every request); grants to named users, the
// owner's access and the policy still decide.
func (b *Backend) publicAccessGate() fiber.Handler {
	return func(ctx fiber.Ctx) error {
		anonymous := isAnonymous(ctx)
		bucket, _, err := b.requestTarget(ctx)
		if err != nil || bucket == "" {
			return ctx.Next()
		}
		rctx := ctx.RequestCtx()
		bk, _, err := b.layer.GetBucket(rctx, bucket)
		if err != nil {
			return ctx.Next()
		}
		raw := bk.Attrs[attrPublicAccessBlock]
		if len(raw) == 0 {
			return ctx.Next()
		}
		var p publicAccessBlock
		if json.Unmarshal(raw, &p) != nil {
			return ctx.Next()
		}
		if !anonymous {
			if p.IgnorePublicAcls {
				ctx.Locals(localIgnorePublicACLs, true)
			}
			return ctx.Next()
		}
		if p.RestrictPublicBuckets || (p.IgnorePublicAcls && !policyIsPublic(bk.Attrs[attrPolicy])) {
			e := s3err.GetAPIError(s3err.ErrAccessDenied)
			ctx.Response().Header.SetContentType("application/xml")
			return ctx.Status(e.HTTPStatusCode).Send(e.XMLBody("", ""))
		}
		if p.IgnorePublicAcls {
			// The policy is public, but may allow only part of what is
			// asked: versitygw decides from the policy, and GetBucketAcl
			// leaves the public grants out of its ACL fallback.
			ctx.Locals(localIgnorePublicACLs, true)
		}
		return ctx.Next()
	}
}

func (b *Backend) publicAccessBlockRoutes() []bucketRoute {
	return []bucketRoute{
		{method: http.MethodPut, query: "publicAccessBlock", metric: metrics.ActionPutPublicAccessBlock,
			action: auth.PutBucketPublicAccessBlockAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				var p publicAccessBlock
				if err := xml.Unmarshal(ctx.Body(), &p); err != nil {
					return nil, errMalformedXML
				}
				raw, _ := json.Marshal(p)
				return nil, b.putAttr(ctx.RequestCtx(), "PutPublicAccessBlock", bucket, attrPublicAccessBlock, raw)
			}},
		{method: http.MethodGet, query: "publicAccessBlock", metric: metrics.ActionGetPublicAccessBlock,
			action: auth.GetBucketPublicAccessBlockAction, perm: auth.PermissionRead,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				raw, err := b.getAttr(ctx.RequestCtx(), "GetPublicAccessBlock", bucket, attrPublicAccessBlock, errNoPublicAccessBlock)
				if err != nil {
					return nil, err
				}
				var p publicAccessBlock
				if err := json.Unmarshal(raw, &p); err != nil {
					return nil, b.mapErr("GetPublicAccessBlock", err, bucket)
				}
				return &controllers.Response{Data: struct {
					XMLName xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ PublicAccessBlockConfiguration"`
					publicAccessBlock
				}{publicAccessBlock: p}}, nil
			}},
		{method: http.MethodDelete, query: "publicAccessBlock", metric: metrics.ActionDeletePublicAccessBlock,
			action: auth.PutBucketPublicAccessBlockAction, perm: auth.PermissionWrite,
			ctrl: func(ctx fiber.Ctx, bucket string) (*controllers.Response, error) {
				err := b.putAttr(ctx.RequestCtx(), "DeletePublicAccessBlock", bucket, attrPublicAccessBlock, nil)
				return &controllers.Response{MetaOpts: &controllers.MetaOptions{Status: http.StatusNoContent}}, err
			}},
	}
}

// PutObjectLockConfiguration is refused: object lock needs versioning.
func (b *Backend) PutObjectLockConfiguration(ctx context.Context, bucket string, _ []byte) error {
	if _, _, err := b.layer.GetBucket(ctx, bucket); err != nil {
		return b.mapErr("PutObjectLockConfiguration", err, bucket)
	}
	return errObjectLockUnsupported
}

// PutObjectRetention is refused: object lock needs versioning.
func (b *Backend) PutObjectRetention(context.Context, string, string, string, []byte) error {
	return errObjectLockUnsupported
}

// PutObjectLegalHold is refused: object lock needs versioning.
func (b *Backend) PutObjectLegalHold(context.Context, string, string, string, bool) error {
	return errObjectLockUnsupported
}

// GetObjectRetention answers that the bucket has no object lock.
func (b *Backend) GetObjectRetention(context.Context, string, string, string) ([]byte, error) {
	return nil, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
}

// GetObjectLegalHold answers that the bucket has no object lock.
func (b *Backend) GetObjectLegalHold(context.Context, string, string, string) (*bool, error) {
	return nil, s3err.GetAPIError(s3err.ErrMissingObjectLockConfigurationNoSpaces)
}
