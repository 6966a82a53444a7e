package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/object"
)

// ACLs. Bucket ACLs are versitygw's: it parses canned ACLs and grant
// headers, enforces them (when the bucket has no policy) and stores them
// through the backend as JSON (auth.ACL). Terrace adds what versitygw
// lacks:
//
//   - grant headers in AWS's syntax (id="NAME", uri="…/AllUsers"), which
//     versitygw would take literally;
//   - object ACLs (PutObjectAcl, x-amz-acl and x-amz-grant-* on uploads),
//     stored with the object and returned by GetObjectAcl — recorded, not
//     enforced: versitygw decides access from the bucket's ACL and policy,
//     which is AWS's behaviour for BucketOwnerEnforced buckets (the default);
//   - object ownership (BucketOwnerEnforced / BucketOwnerPreferred /
//     ObjectWriter) deciding who owns an object;
//   - AWS's AccessControlPolicy XML, with DisplayName and group URIs, for
//     GetBucketAcl and GetObjectAcl (aclResponses rewrites versitygw's
//     answer, which is an SDK struct for objects and lacks DisplayName).

const (
	hdrObjectACL   = "x-terrace-acl"   // object ACL (auth.ACL JSON)
	hdrObjectOwner = "x-terrace-owner" // identity that owns the object (non-enforced buckets)

	allUsersURI  = "http://acs.amazonaws.com/groups/global/AllUsers"
	authUsersURI = "http://acs.amazonaws.com/groups/global/AuthenticatedUsers"
	// versitygw's name for the AllUsers group.
	allUsersID = "all-users"
	// Terrace's name for the AuthenticatedUsers group (object ACLs only).
	authUsersID = "authenticated-users"
)

type granteeKind int

const (
	granteeUser granteeKind = iota
	granteeAllUsers
	granteeUnsupported
)

// parseGrantee reads one grantee of a grant header: AWS's id="…",
// uri="…" or emailAddress="…", or versitygw's bare ID.
func parseGrantee(s string) (granteeKind, string) {
	s = strings.TrimSpace(s)
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return granteeUser, s
	}
	v = strings.Trim(strings.TrimSpace(v), `"`)
	switch strings.ToLower(strings.TrimSpace(k)) {
	case "id":
		return granteeUser, v
	case "uri":
		if v == allUsersURI {
			return granteeAllUsers, v
		}
	case "emailaddress":
	default:
		return granteeUser, s // a bare ID that contains '='
	}
	return granteeUnsupported, v
}

var errUnsupportedGrantee = s3err.APIError{
	Code:           "InvalidArgument",
	Description:    "Terrace supports grantees id=\"USER\" and uri=\"" + allUsersURI + "\" only.",
	HTTPStatusCode: http.StatusBadRequest,
}

var errACLNotSupported = s3err.APIError{
	Code:           "AccessControlListNotSupported",
	Description:    "The bucket does not allow ACLs",
	HTTPStatusCode: http.StatusBadRequest,
}

// normalizeACL rewrites grantees stored by versitygw from grant headers
// in AWS's syntax to identities (id="bob" → bob, the AllUsers URI → the
// all-users group versitygw enforces), dropping duplicates.
func normalizeACL(raw []byte) ([]byte, error) {
	if len(raw) == 0 {
		return raw, nil
	}
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return nil, err
	}
	seen := map[auth.Grantee]bool{}
	out := acl.Grantees[:0]
	for _, g := range acl.Grantees {
		if g.Type == types.TypeCanonicalUser {
			switch kind, id := parseGrantee(g.Access); kind {
			case granteeUser:
				g.Access = id
			case granteeAllUsers:
				g.Type, g.Access = types.TypeGroup, allUsersID
			default:
				return nil, errUnsupportedGrantee
			}
		}
		if !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	acl.Grantees = out
	return json.Marshal(acl)
}

// requestAccount is the account versitygw authenticated (zero when
// anonymous).
func requestAccount(ctx context.Context) auth.Account {
	a, _ := ctx.Value(string(utils.ContextKeyAccount)).(auth.Account)
	return a
}

// ownershipOf is a bucket's object-ownership mode; buckets created before
// it was stored count as BucketOwnerEnforced (AWS's default).
func ownershipOf(bk object.BucketRecord) types.ObjectOwnership {
	if o := types.ObjectOwnership(bk.Attrs[attrOwnership]); o != "" {
		return o
	}
	return types.ObjectOwnershipBucketOwnerEnforced
}

// objectOwner is who owns an object: the bucket owner in a
// BucketOwnerEnforced bucket, else whoever it was recorded for at upload.
func objectOwner(bk object.BucketRecord, o object.Record) string {
	if ownershipOf(bk) != types.ObjectOwnershipBucketOwnerEnforced {
		if w := o.Headers[hdrObjectOwner]; w != "" {
			return w
		}
	}
	return bucketOwner(bk)
}

// uploadACLHeaders returns the stored headers recording the owner and ACL
// of an object a request writes (x-amz-acl / x-amz-grant-* of PutObject,
// CreateMultipartUpload, CopyObject). A BucketOwnerEnforced bucket accepts
// only ACLs equivalent to its own rule — the bucket owner has full
// control: none, bucket-owner-full-control or private (which clients such
// as rclone send by default; there the owner is the bucket owner).
func (b *Backend) uploadACLHeaders(ctx context.Context, bucket string) (map[string]string, error) {
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return nil, b.mapErr("PutObject", err, bucket)
	}
	canned := types.ObjectCannedACL(requestHeader(ctx, "X-Amz-Acl"))
	grants := grantHeaders(ctx)
	mode := ownershipOf(bk)
	if mode == types.ObjectOwnershipBucketOwnerEnforced {
		switch {
		case len(grants) > 0:
			return nil, errACLNotSupported
		case canned == "", canned == types.ObjectCannedACLBucketOwnerFullControl, canned == types.ObjectCannedACLPrivate:
			return nil, nil
		}
		return nil, errACLNotSupported
	}
	owner := requestAccount(ctx).Access
	if owner == "" {
		owner = bucketOwner(bk) // anonymous write to a public-write bucket
	}
	if mode == types.ObjectOwnershipBucketOwnerPreferred && canned == types.ObjectCannedACLBucketOwnerFullControl {
		owner = bucketOwner(bk)
	}
	h := map[string]string{hdrObjectOwner: owner}
	if canned == "" && len(grants) == 0 {
		return h, nil
	}
	acl, err := b.buildObjectACL(ctx, bk, owner, canned, grants)
	if err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(acl)
	if err := b.checkPublicACL(ctx, bucket, raw); err != nil {
		return nil, err
	}
	h[hdrObjectACL] = string(raw)
	return h, nil
}

// grantHeaders returns the x-amz-grant-* headers of the request by
// permission.
func grantHeaders(ctx context.Context) map[auth.Permission]string {
	out := map[auth.Permission]string{}
	for h, p := range map[string]auth.Permission{
		"X-Amz-Grant-Full-Control": auth.PermissionFullControl, "X-Amz-Grant-Read": auth.PermissionRead,
		"X-Amz-Grant-Read-Acp": auth.PermissionReadAcp, "X-Amz-Grant-Write": auth.PermissionWrite,
		"X-Amz-Grant-Write-Acp": auth.PermissionWriteAcp,
	} {
		if v := requestHeader(ctx, h); v != "" {
			out[p] = v
		}
	}
	return out
}

// buildObjectACL makes an object ACL from a canned ACL or grants.
func (b *Backend) buildObjectACL(ctx context.Context, bk object.BucketRecord, owner string, canned types.ObjectCannedACL, grants map[auth.Permission]string) (auth.ACL, error) {
	if canned != "" && len(grants) > 0 {
		return auth.ACL{}, s3err.GetAPIError(s3err.ErrBothCannedAndHeaderGrants)
	}
	acl := auth.ACL{Owner: owner, Grantees: []auth.Grantee{{Permission: auth.PermissionFullControl, Access: owner, Type: types.TypeCanonicalUser}}}
	group := func(p auth.Permission, id string) auth.Grantee {
		return auth.Grantee{Permission: p, Access: id, Type: types.TypeGroup}
	}
	user := func(p auth.Permission, id string) auth.Grantee {
		return auth.Grantee{Permission: p, Access: id, Type: types.TypeCanonicalUser}
	}
	switch canned {
	case "", types.ObjectCannedACLPrivate:
	case types.ObjectCannedACLPublicRead:
		acl.Grantees = append(acl.Grantees, group(auth.PermissionRead, allUsersID))
	case types.ObjectCannedACLPublicReadWrite:
		acl.Grantees = append(acl.Grantees, group(auth.PermissionRead, allUsersID), group(auth.PermissionWrite, allUsersID))
	case types.ObjectCannedACLAuthenticatedRead:
		acl.Grantees = append(acl.Grantees, group(auth.PermissionRead, authUsersID))
	case types.ObjectCannedACLBucketOwnerRead:
		if bo := bucketOwner(bk); bo != owner {
			acl.Grantees = append(acl.Grantees, user(auth.PermissionRead, bo))
		}
	case types.ObjectCannedACLBucketOwnerFullControl:
		if bo := bucketOwner(bk); bo != owner {
			acl.Grantees = append(acl.Grantees, user(auth.PermissionFullControl, bo))
		}
	default:
		return auth.ACL{}, s3err.GetInvalidArgumentErr(s3err.InvalidArgCannedAcl, string(canned))
	}
	if len(grants) > 0 {
		acl.Grantees = acl.Grantees[:0]
	}
	var names []string
	for _, p := range []auth.Permission{auth.PermissionFullControl, auth.PermissionRead, auth.PermissionReadAcp, auth.PermissionWrite, auth.PermissionWriteAcp} {
		for _, g := range strings.Split(grants[p], ",") {
			if strings.TrimSpace(g) == "" {
				continue
			}
			switch kind, id := parseGrantee(g); kind {
			case granteeUser:
				acl.Grantees = append(acl.Grantees, user(p, id))
				names = append(names, id)
			case granteeAllUsers:
				acl.Grantees = append(acl.Grantees, group(p, allUsersID))
			default:
				return auth.ACL{}, errUnsupportedGrantee
			}
		}
	}
	if err := b.checkGrantees(names); err != nil {
		return auth.ACL{}, err
	}
	return acl, nil
}

// checkGrantees fails unless every named user exists.
func (b *Backend) checkGrantees(names []string) error {
	if len(names) == 0 || b.iam == nil {
		return nil
	}
	_, err := b.iam.ResolveAccounts(names)
	return err
}

// PutObjectAcl sets an object's ACL from a canned ACL, grant headers or
// an AccessControlPolicy body (versitygw passes the first two; the body
// is read from the request).
func (b *Backend) PutObjectAcl(ctx context.Context, in *s3.PutObjectAclInput) error {
	bucket, key := deref(in.Bucket), deref(in.Key)
	info, err := b.head(ctx, "PutObjectAcl", bucket, key, in.VersionId)
	if err != nil {
		return err
	}
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return b.mapErr("PutObjectAcl", err, bucket)
	}
	if ownershipOf(bk) == types.ObjectOwnershipBucketOwnerEnforced {
		return errACLNotSupported
	}
	owner := objectOwner(bk, info.Object)
	var acl auth.ACL
	grants := grantHeaders(ctx)
	body := requestBody(ctx)
	switch {
	case in.ACL != "" || len(grants) > 0:
		if len(bytes.TrimSpace(body)) > 0 {
			return s3err.GetAPIError(s3err.ErrUnexpectedContent)
		}
		if acl, err = b.buildObjectACL(ctx, bk, owner, in.ACL, grants); err != nil {
			return err
		}
	case len(bytes.TrimSpace(body)) > 0:
		if acl, err = b.parseACLBody(body, owner); err != nil {
			return err
		}
	default:
		return s3err.GetAPIError(s3err.ErrMissingSecurityHeader)
	}
	raw, _ := json.Marshal(acl)
	if err := b.checkPublicACL(ctx, bucket, raw); err != nil {
		return err
	}
	err = b.layer.UpdateObject(ctx, bucket, key, func(o *object.Record) error {
		o.Headers = mergeHeaders(o.Headers, map[string]string{hdrObjectACL: string(raw)})
		return nil
	})
	return b.mapErr("PutObjectAcl", err, bucket)
}

// requestBody returns the raw request body (PutObjectAcl's XML).
func requestBody(ctx context.Context) []byte {
	rc, ok := ctx.(*fasthttp.RequestCtx)
	if !ok || rc == nil {
		return nil
	}
	return rc.Request.Body()
}

// aclPolicyXML is AWS's AccessControlPolicy as a request body.
type aclPolicyXML struct {
	Owner struct {
		ID string `xml:"ID"`
	} `xml:"Owner"`
	Grants []struct {
		Grantee struct {
			Type string `xml:"http://www.w3.org/2001/XMLSchema-instance type,attr"`
			ID   string `xml:"ID"`
			URI  string `xml:"URI"`
		} `xml:"Grantee"`
		Permission auth.Permission `xml:"Permission"`
	} `xml:"AccessControlList>Grant"`
}

func (b *Backend) parseACLBody(body []byte, owner string) (auth.ACL, error) {
	var doc aclPolicyXML
	if err := xml.Unmarshal(body, &doc); err != nil {
		return auth.ACL{}, s3err.GetAPIError(s3err.ErrMalformedACL)
	}
	if doc.Owner.ID != "" && doc.Owner.ID != owner {
		return auth.ACL{}, s3err.GetAPIError(s3err.ErrMalformedACL)
	}
	acl := auth.ACL{Owner: owner}
	var names []string
	for _, g := range doc.Grants {
		switch g.Permission {
		case auth.PermissionFullControl, auth.PermissionRead, auth.PermissionReadAcp, auth.PermissionWrite, auth.PermissionWriteAcp:
		default:
			return auth.ACL{}, s3err.GetAPIError(s3err.ErrMalformedACL)
		}
		switch {
		case g.Grantee.Type == string(types.TypeGroup) && g.Grantee.URI == allUsersURI:
			acl.Grantees = append(acl.Grantees, auth.Grantee{Permission: g.Permission, Access: allUsersID, Type: types.TypeGroup})
		case g.Grantee.Type == string(types.TypeGroup) && g.Grantee.URI == authUsersURI:
			acl.Grantees = append(acl.Grantees, auth.Grantee{Permission: g.Permission, Access: authUsersID, Type: types.TypeGroup})
		case g.Grantee.Type == string(types.TypeCanonicalUser) && g.Grantee.ID != "":
			acl.Grantees = append(acl.Grantees, auth.Grantee{Permission: g.Permission, Access: g.Grantee.ID, Type: types.TypeCanonicalUser})
			names = append(names, g.Grantee.ID)
		default:
			return auth.ACL{}, errUnsupportedGrantee
		}
	}
	if err := b.checkGrantees(names); err != nil {
		return auth.ACL{}, err
	}
	return acl, nil
}

// GetObjectAcl answers the object's ACL (its owner with full control when
// none was set). The XML AWS clients expect is written by aclResponses;
// this result is what versitygw encodes if the rewrite cannot run.
func (b *Backend) GetObjectAcl(ctx context.Context, in *s3.GetObjectAclInput) (*s3.GetObjectAclOutput, error) {
	bucket := deref(in.Bucket)
	acl, err := b.objectACL(ctx, bucket, deref(in.Key), in.VersionId)
	if err != nil {
		return nil, err
	}
	out := &s3.GetObjectAclOutput{Owner: &types.Owner{ID: &acl.Owner, DisplayName: &acl.Owner}}
	for _, g := range acl.Grantees {
		id := g.Access
		out.Grants = append(out.Grants, types.Grant{Grantee: &types.Grantee{ID: &id, Type: g.Type}, Permission: types.Permission(g.Permission)})
	}
	return out, nil
}

// objectACL is an object's effective ACL.
func (b *Backend) objectACL(ctx context.Context, bucket, key string, version *string) (auth.ACL, error) {
	info, err := b.head(ctx, "GetObjectAcl", bucket, key, version)
	if err != nil {
		return auth.ACL{}, err
	}
	bk, _, err := b.layer.GetBucket(ctx, bucket)
	if err != nil {
		return auth.ACL{}, b.mapErr("GetObjectAcl", err, bucket)
	}
	owner := objectOwner(bk, info.Object)
	if raw := info.Headers[hdrObjectACL]; raw != "" && ownershipOf(bk) != types.ObjectOwnershipBucketOwnerEnforced {
		if acl, err := auth.ParseACL([]byte(raw)); err == nil {
			acl.Owner = owner
			return acl, nil
		}
	}
	return auth.ACL{Owner: owner, Grantees: []auth.Grantee{{Permission: auth.PermissionFullControl, Access: owner, Type: types.TypeCanonicalUser}}}, nil
}

// aclXML encodes an ACL as AWS's AccessControlPolicy document.
func aclXML(acl auth.ACL) []byte {
	var w bytes.Buffer
	esc := func(s string) string {
		var e bytes.Buffer
		_ = xml.EscapeText(&e, []byte(s))
		return e.String()
	}
	w.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	w.WriteString(`<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	fmt.Fprintf(&w, "<Owner><ID>%s</ID><DisplayName>%s</DisplayName></Owner><AccessControlList>", esc(acl.Owner), esc(acl.Owner))
	for _, g := range acl.Grantees {
		w.WriteString(`<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" `)
		switch {
		case g.Type == types.TypeGroup && g.Access == allUsersID:
			fmt.Fprintf(&w, `xsi:type="Group"><URI>%s</URI>`, allUsersURI)
		case g.Type == types.TypeGroup && g.Access == authUsersID:
			fmt.Fprintf(&w, `xsi:type="Group"><URI>%s</URI>`, authUsersURI)
		default:
			fmt.Fprintf(&w, `xsi:type="CanonicalUser"><ID>%s</ID><DisplayName>%s</DisplayName>`, esc(g.Access), esc(g.Access))
		}
		fmt.Fprintf(&w, "</Grantee><Permission>%s</Permission></Grant>", esc(string(g.Permission)))
	}
	w.WriteString("</AccessControlList></AccessControlPolicy>")
	return w.Bytes()
}

// aclResponses rewrites successful GetBucketAcl and GetObjectAcl answers
// into AWS's AccessControlPolicy XML. versitygw encodes GetObjectAcl's SDK
// struct as is (<GetObjectAclOutput>, which no client parses) and writes
// bucket ACLs without DisplayName and with group grantees as IDs. The
// rewrite runs only after versitygw authorized and answered 200, so it
// adds no access path.
func (b *Backend) aclResponses() fiber.Handler {
	return func(ctx fiber.Ctx) error {
		if ctx.Method() != http.MethodGet || !ctx.Request().URI().QueryArgs().Has("acl") {
			return ctx.Next()
		}
		// The bucket and key versitygw answered for: with a virtual
		// domain, the bucket may be in the Host and the path all key.
		bucket, key, terr := b.requestTarget(ctx)
		err := ctx.Next()
		if err != nil || terr != nil || ctx.Response().StatusCode() != http.StatusOK {
			return err
		}
		if bucket == "" {
			return nil
		}
		// The document shows the stored ACL, public grants included, even
		// when IgnorePublicAcls kept them out of the authorization.
		rctx := ctx.RequestCtx()
		var acl auth.ACL
		var aerr error
		if key == "" {
			var raw []byte
			if raw, aerr = b.bucketACL(rctx, bucket, false); aerr == nil {
				acl, aerr = auth.ParseACL(raw)
			}
			if acl.Owner == "" {
				acl.Owner = b.rootUser
			}
		} else {
			var version *string
			if v := string(ctx.Request().URI().QueryArgs().Peek("versionId")); v != "" {
				version = &v
			}
			acl, aerr = b.objectACL(rctx, bucket, key, version)
		}
		if aerr != nil {
			b.log.Warn("s3: ACL document not rewritten", "bucket", bucket, "key", key, "err", aerr)
			return nil
		}
		doc := aclXML(acl)
		ctx.Response().SetBodyRaw(doc)
		ctx.Response().Header.SetContentType("application/xml")
		ctx.Response().Header.SetContentLength(len(doc))
		return nil
	}
}
