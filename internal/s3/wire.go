package s3

import (
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"
	"unsafe"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/gofiber/fiber/v3"
	"github.com/valyala/fasthttp"
	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"
	"github.com/versity/versitygw/s3api/utils"
	"github.com/versity/versitygw/s3err"

	"github.com/terrace-storage/terrace/internal/sse"
)

// HTTP-level fixes in front of versitygw: uploads without Content-Length
// and Expect: 100-continue.

// maxSpoolBytes bounds a body without Content-Length: S3's single-PUT
// limit.
const maxSpoolBytes = 5 << 30

// spoolChunked makes object uploads sent with Transfer-Encoding: chunked
// and no Content-Length work: versitygw refuses them (411
// MissingContentLength) because it needs the length up front, which is
// how streaming clients upload data of unknown size. The body is spooled
// to an unlinked temporary file — encrypted with a throwaway in-memory
// key, so no plaintext reaches the disk — and handed on with its length.
// Signatures are unaffected: a client cannot sign a Content-Length it did
// not send, and the payload hash still covers the bytes.
//
// Nothing is spooled before the request is known to be allowed to send
// it: a signed or presigned request's signature is checked on its headers
// first (a bad one is answered with its error, the body unread), then
// whether the signer may write to the bucket — the bucket must exist
// (else 404 NoSuchBucket) and versitygw's own authorization (bucket
// policy, ACL, identity: auth.VerifyAccess, as its PutObject controller
// calls it) must allow the object action (else 403 AccessDenied), both
// answered with the body unread. An anonymous request is spooled only
// when the bucket lets anyone write to it; any other anonymous request
// goes on unspooled, for versitygw to refuse. The pre-check is no
// stricter than versitygw's own, which runs again on the spooled request.
func (e routeEnv) spoolChunked() fiber.Handler {
	b := e.be
	checkSignature := e.signatureCheck()
	return func(ctx fiber.Ctx) error {
		req := ctx.Request()
		if string(req.Header.Method()) != http.MethodPut || req.Header.ContentLength() != -1 || b.spoolBudget.off() {
			return ctx.Next()
		}
		bucket, key, err := b.requestTarget(ctx)
		if err != nil || bucket == "" || key == "" {
			return ctx.Next() // bucket sub-resources read their small bodies themselves
		}
		who, se := checkSignature(ctx)
		if se != nil {
			return sendS3Error(ctx, se)
		}
		switch {
		case isAnonymous(ctx):
			if auth.VerifyPublicAccess(ctx, b, uploadAction(ctx), auth.PermissionWrite, bucket, key) != nil {
				return ctx.Next()
			}
		case !who.verified:
			// The signature check could not decide (an internal error):
			// versitygw answers it, unspooled.
			return ctx.Next()
		default:
			if err := e.mayUpload(ctx, who, bucket, key); err != nil {
				var se s3err.S3Error
				if !errors.As(err, &se) {
					b.log.Warn("s3: authorizing a chunked upload failed", "bucket", bucket, "err", err)
					se = s3err.GetAPIError(s3err.ErrInternalError)
				}
				return sendS3Error(ctx, se)
			}
		}
		f, n, err := b.spool(req.BodyStream())
		if err != nil {
			var code s3err.S3Error
			switch {
			case errors.Is(err, errSpoolTooLarge):
				most := b.spoolBudget.most()
				code = s3err.GetEntityTooLargeErr(most+1, most)
			case errors.Is(err, errSpoolBusy):
				code = s3err.GetAPIError(s3err.ErrSlowDown)
			default:
				b.log.Warn("s3: spooling a chunked upload failed", "err", err)
				code = s3err.GetAPIError(s3err.ErrIncompleteBody)
			}
			return sendS3Error(ctx, code)
		}
		defer f.close()
		req.SetBodyStream(f.reader, int(n))
		return ctx.Next()
	}
}

// uploadAction is the policy action versitygw authorizes an object PUT
// with: its sub-resources (tagging, ACL, retention, legal hold) have their
// own; an object upload, a part upload and a copy are s3:PutObject.
func uploadAction(ctx fiber.Ctx) auth.Action {
	q := ctx.Request().URI().QueryArgs()
	switch {
	case q.Has("tagging") && q.Has("versionId"):
		return auth.PutObjectVersionTaggingAction
	case q.Has("tagging"):
		return auth.PutObjectTaggingAction
	case q.Has("acl"):
		return auth.PutObjectAclAction
	case q.Has("retention"):
		return auth.PutObjectRetentionAction
	case q.Has("legal-hold"):
		return auth.PutObjectLegalHoldAction
	}
	return auth.PutObjectAction
}

// mayUpload answers nil when the signer may write to bucket/key, as
// versitygw's controllers decide it: the bucket's ACL as its ParseAcl
// middleware reads it (NoSuchBucket for a bucket that does not exist; no
// owner recorded means root's; a mismatching X-Amz-Expected-Bucket-Owner
// is AccessDenied), then auth.VerifyAccess with the object action. Extra
// actions versitygw adds for some headers (tagging, object lock) are left
// to its own check after the spool: this one only has to refuse what it
// will certainly refuse.
func (e routeEnv) mayUpload(ctx fiber.Ctx, who signer, bucket, key string) error {
	raw, err := e.be.GetBucketAcl(ctx.RequestCtx(), &s3.GetBucketAclInput{Bucket: &bucket})
	if err != nil {
		return err
	}
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return err
	}
	if acl.Owner == "" {
		acl.Owner = e.root.Access
	}
	if o := ctx.Get("X-Amz-Expected-Bucket-Owner"); o != "" && o != acl.Owner {
		return s3err.GetAPIError(s3err.ErrAccessDenied)
	}
	return auth.VerifyAccess(ctx, e.be, auth.AccessOptions{
		Acl: acl, AclPermission: auth.PermissionWrite, IsRoot: who.isRoot, Acc: who.acct,
		Bucket: bucket, Object: key, Actions: []auth.Action{uploadAction(ctx)}, Iam: e.iam,
	})
}

// requestTarget returns the bucket and key a request addresses, resolved
// as versitygw routes it: Terrace's middlewares run on the request as
// received, before versitygw's DecodeURL (the path unescaped) and
// HostStyleParser (a Host of <bucket>.<virtual domain> names the bucket,
// the whole path is the key). err is set for a path that does not
// unescape (versitygw refuses those).
func (b *Backend) requestTarget(ctx fiber.Ctx) (bucket, key string, err error) {
	path, err := url.PathUnescape(string(ctx.Request().URI().PathOriginal()))
	if err != nil {
		return "", "", err
	}
	path = strings.TrimPrefix(path, "/")
	if b.virtualDomain != "" {
		// HostStyleParser's test, as it makes it.
		if host, _, found := strings.Cut(string(ctx.Request().Host()), "."+b.virtualDomain); found && host != "" {
			return host, path, nil
		}
	}
	bucket, key, _ = strings.Cut(path, "/")
	return bucket, key, nil
}

// isAnonymous reports whether a request carries no credentials, exactly as
// versitygw's AuthorizePublicBucketAccess decides it: no Authorization
// header and no presigned-URL authentication (a query auth parameter with a
// value: an empty X-Amz-Signature does not count).
func isAnonymous(ctx fiber.Ctx) bool {
	return ctx.Get("Authorization") == "" && !utils.IsPresignedURLAuth(ctx)
}

// sendS3Error answers a request with an S3 error document.
func sendS3Error(ctx fiber.Ctx, se s3err.S3Error) error {
	ctx.Response().Header.SetContentType("application/xml")
	return ctx.Status(se.StatusCode()).Send(se.XMLBody("", ""))
}

var (
	errSpoolTooLarge = errors.New("s3: body exceeds the single-upload limit or the spool budget")
	errSpoolBusy     = errors.New("s3: the spool budget is taken by other uploads")
)

// spoolBudget bounds the bytes of chunked uploads spooled at once on the
// node, so that uploads without Content-Length — which anyone allowed to
// write to some bucket may send, up to 5 GiB each — cannot fill the disk
// the spool shares with the metadata store. Each spooling upload takes its
// bytes as it reads them and gives them all back when its request ends.
type spoolBudget struct {
	mu    sync.Mutex
	limit int64 // negative: no spooling
	used  int64
}

// take takes n more bytes for an upload that holds held: errSpoolTooLarge
// if held+n exceeds the whole budget (it would never fit), errSpoolBusy if
// it does not fit in what is left now.
func (s *spoolBudget) take(held, n int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case held+n > s.limit:
		return errSpoolTooLarge
	case s.used+n > s.limit:
		return errSpoolBusy
	}
	s.used += n
	return nil
}

func (s *spoolBudget) give(n int64) {
	s.mu.Lock()
	s.used -= n
	s.mu.Unlock()
}

func (s *spoolBudget) off() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit < 0
}

// most is the largest body that can be spooled.
func (s *spoolBudget) most() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return min(s.limit, maxSpoolBytes)
}

func (s *spoolBudget) inUse() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used
}

// setLimit changes the budget (tests) and returns the previous one.
func (s *spoolBudget) setLimit(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.limit
	s.limit = n
	return old
}

// budgetReader takes from the budget every byte it reads.
type budgetReader struct {
	r      io.Reader
	budget *spoolBudget
	held   int64
}

func (r *budgetReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		if terr := r.budget.take(r.held, int64(n)); terr != nil {
			return 0, terr
		}
		r.held += int64(n)
	}
	return n, err
}

// release gives back everything taken.
func (r *budgetReader) release() {
	r.budget.give(r.held)
	r.held = 0
}

// maxDrainBytes bounds how much of a refused upload's body is read and
// discarded so the client gets the error instead of a connection reset.
// Larger bodies are cut off: clients send those with Expect: 100-continue
// (answered before any byte is sent, see expectOptions), and reading
// gigabytes only to refuse them would let anyone waste the node's network.
const maxDrainBytes = 16 << 20

// drainRefused reads what is left of the body of a request answered with
// an error, up to maxDrainBytes. Without it, a refusal that comes before
// the body is read (a bad storage class, a denied bucket) closes the
// connection while the client is still writing, and the client sees
// "connection reset by peer" instead of the S3 error.
func (b *Backend) drainRefused() fiber.Handler {
	return func(ctx fiber.Ctx) error {
		err := ctx.Next()
		if err == nil && ctx.Response().StatusCode() < 400 {
			return nil
		}
		if body := ctx.Request().BodyStream(); body != nil {
			_, _ = io.CopyN(io.Discard, body, maxDrainBytes)
		}
		return err
	}
}

// spooled is a spooled body: a decrypting reader over an unlinked file,
// and the share of the spool budget it holds.
type spooled struct {
	file   *os.File
	reader io.Reader
	held   *budgetReader
}

func (s *spooled) close() {
	s.file.Close()
	s.held.release()
}

func (b *Backend) spool(body io.Reader) (_ *spooled, _ int64, err error) {
	if body == nil {
		body = strings.NewReader("")
	}
	f, err := os.CreateTemp(b.opts.SpoolDir, "terrace-spool-*")
	if err != nil {
		return nil, 0, err
	}
	os.Remove(f.Name()) // unlinked: nothing is left behind, even on a crash
	held := &budgetReader{r: io.LimitReader(body, maxSpoolBytes+1), budget: b.spoolBudget}
	defer func() {
		if err != nil {
			f.Close()
			held.release()
		}
	}()
	key, err := sse.NewDataKey()
	if err != nil {
		return nil, 0, err
	}
	counter := &countingReader{r: held}
	enc, err := sse.NewEncrypter(key, counter)
	if err != nil {
		return nil, 0, err
	}
	if _, err := io.Copy(f, enc); err != nil {
		return nil, 0, err
	}
	n := counter.n
	if n > maxSpoolBytes {
		return nil, 0, errSpoolTooLarge
	}
	s := &spooled{file: f, reader: strings.NewReader(""), held: held}
	if n > 0 {
		var hdr [sse.HeaderSize]byte
		if _, err := f.ReadAt(hdr[:], 0); err != nil {
			return nil, 0, err
		}
		st, err := sse.OpenStream(key, hdr[:])
		if err != nil {
			return nil, 0, err
		}
		if s.reader, err = st.NewReader(io.NewSectionReader(f, sse.HeaderSize, 1<<62), n, 0, n); err != nil {
			return nil, 0, err
		}
	}
	return s, n, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// expectOptions make versitygw answer Expect: 100-continue only after the
// request's signature checked out. fasthttp sends "100 Continue" before
// any handler runs (versitygw sets no ExpectHandler), so a client with a
// wrong secret or an unknown key would be invited to send a body that is
// then thrown away. The handler runs versitygw's own signature middleware
// on the request headers; a refusal is answered with the S3 error and the
// connection closed before the body is sent.
//
// versitygw gives no access to its fiber app (which owns the fasthttp
// server); the app is taken from the S3ApiServer an s3api.Option sees,
// by field name, once the server is listening — before it serves a
// connection, so no request races the assignment. If versitygw renames
// the field the hook is skipped with a warning (and the Expect test
// fails), never a crash.
func (e routeEnv) expectOptions(log *slog.Logger) []s3api.Option {
	var srv *s3api.S3ApiServer
	return []s3api.Option{
		func(s *s3api.S3ApiServer) { srv = s },
		s3api.WithOnListen(func() {
			app := fiberAppOf(srv)
			if app == nil {
				log.Warn("s3: cannot reach versitygw's HTTP server; Expect: 100-continue is answered before authentication")
				return
			}
			app.Server().ExpectHandler = e.expectHandler(app)
		}),
	}
}

// fiberAppOf reads S3ApiServer's unexported fiber app.
func fiberAppOf(s *s3api.S3ApiServer) *fiber.App {
	if s == nil {
		return nil
	}
	f := reflect.ValueOf(s).Elem().FieldByName("app")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*fiber.App)(nil)) || f.IsNil() {
		return nil
	}
	return (*fiber.App)(unsafe.Pointer(f.Pointer()))
}

// requestLocals are the request locals the signature middlewares set;
// they are cleared after the early check so the real request starts
// clean.
var requestLocals = []utils.ContextKey{
	utils.ContextKeyRegion, utils.ContextKeyStartTime, utils.ContextKeyRootAccessKey, utils.ContextKeyAccount,
	utils.ContextKeyIsRoot, utils.ContextKeyAuthenticated, utils.ContextKeyPublicBucket, utils.ContextKeyBodyReader,
}

func (e routeEnv) expectHandler(app *fiber.App) func(*fasthttp.RequestCtx) int {
	checkSignature := e.signatureCheck()
	return func(fctx *fasthttp.RequestCtx) int {
		c := app.AcquireCtx(fctx)
		defer app.ReleaseCtx(c)
		if _, se := checkSignature(c); se != nil {
			fctx.Response.Header.SetContentType("application/xml")
			fctx.Response.SetBody(se.XMLBody("", ""))
			return se.StatusCode()
		}
		return fasthttp.StatusContinue
	}
}

// signatureCheck returns a check of a request's SigV4 signature or
// presigned URL on its headers alone — versitygw's own signature
// middlewares, run before the body is read — that leaves the request as
// it found it (path and request locals), for the real pass. The check
// answers the S3 error versitygw would answer for a bad signature, and nil
// when the signature checks out or the request carries none (whether an
// anonymous request may proceed is for the caller to decide). A missing
// Content-Length, which versitygw reports only once the signature checked
// out, is not a refusal here: a chunked upload is spooled to get one.
// When the signature checked out, the signer is returned as well.
func (e routeEnv) signatureCheck() func(fiber.Ctx) (signer, s3err.S3Error) {
	verify := middlewares.VerifyV4Signature(e.root, e.iam, e.region, true, true, false)
	presigned := middlewares.VerifyPresignedV4Signature(e.root, e.iam, e.region, true)
	return func(c fiber.Ctx) (who signer, refused s3err.S3Error) {
		if isAnonymous(c) {
			return signer{}, nil
		}
		// versitygw's presigned-URL middleware runs first and, when it
		// applies, its header-signature middleware does not.
		isPresigned := utils.IsPresignedURLAuth(c)
		// versitygw verifies signatures after its DecodeURL middleware
		// replaced the request path with its unescaped form (the canonical
		// request re-escapes it); do the same here, and restore the path
		// as received for the real pass.
		orig := string(c.Request().URI().PathOriginal())
		defer func() {
			for _, k := range requestLocals {
				k.Delete(c)
			}
			c.Path(orig)
			if r := recover(); r != nil {
				who, refused = signer{}, nil // let the real pass answer
			}
		}()
		if p, err := url.PathUnescape(orig); err == nil {
			c.Path(p)
		}
		_ = e.setRequestDefaults(c)
		var err error
		if isPresigned {
			err = presigned(c)
		} else {
			err = verify(c)
		}
		var se s3err.S3Error
		if err == nil || errors.As(err, &se) && se.BaseError().Code == "MissingContentLength" {
			// The signature checked out (the account is set before the
			// Content-Length check).
			who.acct, _ = utils.ContextKeyAccount.Get(c).(auth.Account)
			who.isRoot, _ = utils.ContextKeyIsRoot.Get(c).(bool)
			who.verified = true
			return who, nil
		}
		if !errors.As(err, &se) {
			return signer{}, nil // not an S3 error: let the real pass answer
		}
		return signer{}, se
	}
}

// signer is who signed a request whose signature checked out (verified),
// as versitygw's signature middleware resolved the access key.
type signer struct {
	acct     auth.Account
	isRoot   bool
	verified bool
}

// copySourceCheck authorizes the source of a CopyObject or UploadPartCopy
// for the key it names, as Terrace resolves it (parseCopySource):
// versitygw authorizes "bucket/key?versionId=V" as the object ARN, which a
// Deny on the key does not match. The signer needs s3:GetObject on the key
// (s3:GetObjectVersion when a version is named) under the source bucket's
// policy or ACL, as versitygw decides it; root and admins need nothing.
// Requests this cannot decide (anonymous, unparsable copy source, a
// signature it cannot check) go on for versitygw to answer.
func (e routeEnv) copySourceCheck() fiber.Handler {
	b := e.be
	checkSignature := e.signatureCheck()
	return func(ctx fiber.Ctx) error {
		src := ctx.Get("X-Amz-Copy-Source")
		if src == "" || string(ctx.Request().Header.Method()) != http.MethodPut || isAnonymous(ctx) {
			return ctx.Next()
		}
		bucket, key, version, err := parseCopySource(src)
		if err != nil {
			return ctx.Next()
		}
		who, se := checkSignature(ctx)
		if se != nil {
			return sendS3Error(ctx, se)
		}
		if !who.verified || who.isRoot || who.acct.Role == auth.RoleAdmin {
			return ctx.Next()
		}
		action := auth.GetObjectAction
		if version != "" {
			action = auth.GetObjectVersionAction
		}
		err = e.mayRead(ctx, who, bucket, key, action)
		if err == nil {
			return ctx.Next()
		}
		if !errors.As(err, &se) {
			b.log.Warn("s3: authorizing a copy source failed", "bucket", bucket, "err", err)
			se = s3err.GetAPIError(s3err.ErrInternalError)
		}
		return sendS3Error(ctx, se)
	}
}

// mayRead answers nil when the signer may perform action on bucket/key, as
// versitygw's VerifyObjectCopyAccess decides it for a copy source.
func (e routeEnv) mayRead(ctx fiber.Ctx, who signer, bucket, key string, action auth.Action) error {
	raw, err := e.be.GetBucketAcl(ctx.RequestCtx(), &s3.GetBucketAclInput{Bucket: &bucket})
	if err != nil {
		return err
	}
	acl, err := auth.ParseACL(raw)
	if err != nil {
		return err
	}
	if acl.Owner == "" {
		acl.Owner = e.root.Access
	}
	return auth.VerifyAccess(ctx, e.be, auth.AccessOptions{
		Acl: acl, AclPermission: auth.PermissionRead, IsRoot: who.isRoot, Acc: who.acct,
		Bucket: bucket, Object: key, Actions: []auth.Action{action}, Iam: e.iam,
	})
}
