package adminauth

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	// Service is the SigV4 service name of the admin API.
	Service = "terrace-admin"
	// algorithm is the only SigV4 variant accepted.
	algorithm = "AWS4-HMAC-SHA256"
	// UnsignedPayload marks a body that is not covered by the signature
	// (streamed object data, as S3 allows); TLS protects it in transit.
	UnsignedPayload = "UNSIGNED-PAYLOAD"
	// MaxSkew is how far a request's X-Amz-Date may be from the server's
	// clock (AWS's 15 minutes): it bounds the replay window.
	MaxSkew = 15 * time.Minute
	// maxHashedBody is the largest body the client transport hashes into
	// the signature; larger or unknown-length bodies are sent unsigned.
	maxHashedBody = 1 << 20
	// DefaultRegion is used when none is configured.
	DefaultRegion = "us-east-1"
)

// emptySHA256 is the payload hash of a request without a body.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// Key is one credential.
type Key struct {
	Secret string
	// Admin keys may use the admin API; others are refused with 403.
	Admin bool
}

// Keyring looks up the secret of an access key.
type Keyring interface {
	Lookup(accessKey string) (Key, bool)
}

// StaticKeyring is a fixed set of keys (the root account).
type StaticKeyring map[string]Key

// Lookup implements Keyring.
func (s StaticKeyring) Lookup(accessKey string) (Key, bool) {
	k, ok := s[accessKey]
	return k, ok
}

// Keyrings tries each keyring in order.
type Keyrings []Keyring

// Lookup implements Keyring.
func (ks Keyrings) Lookup(accessKey string) (Key, bool) {
	for _, k := range ks {
		if key, ok := k.Lookup(accessKey); ok {
			return key, true
		}
	}
	return Key{}, false
}

// Error is a refusal: the HTTP status, a stable code and the reason.
type Error struct {
	Status int
	Code   string
	Reason string
}

func (e *Error) Error() string { return e.Code + ": " + e.Reason }

func unauthenticated(reason string) *Error {
	return &Error{Status: http.StatusUnauthorized, Code: "Unauthenticated", Reason: reason}
}

func forbidden(code, reason string) *Error {
	return &Error{Status: http.StatusForbidden, Code: code, Reason: reason}
}

// authHeader is a parsed SigV4 Authorization header.
type authHeader struct {
	accessKey     string
	date          string // YYYYMMDD of the credential scope
	region        string
	service       string
	signedHeaders []string
	signature     string
}

// parseAuthorization parses
// "AWS4-HMAC-SHA256 Credential=AK/20261123/us-east-1/terrace-admin/aws4_request,
// SignedHeaders=host;x-amz-date, Signature=hex".
func parseAuthorization(h string) (authHeader, error) {
	var a authHeader
	alg, rest, ok := strings.Cut(h, " ")
	if !ok || alg != algorithm {
		return a, fmt.Errorf("authorization is not %s", algorithm)
	}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, fmt.Errorf("malformed authorization field %q", part)
		}
		switch k {
		case "Credential":
			f := strings.Split(v, "/")
			if len(f) != 5 || f[4] != "aws4_request" || f[0] == "" {
				return a, errors.New("malformed credential scope")
			}
			a.accessKey, a.date, a.region, a.service = f[0], f[1], f[2], f[3]
		case "SignedHeaders":
			a.signedHeaders = strings.Split(v, ";")
		case "Signature":
			if _, err := hex.DecodeString(v); err != nil || len(v) != 64 {
				return a, errors.New("malformed signature")
			}
			a.signature = v
		default:
			return a, fmt.Errorf("unknown authorization field %q", k)
		}
	}
	if a.accessKey == "" || a.signature == "" || len(a.signedHeaders) == 0 {
		return a, errors.New("authorization lacks credential, signed headers or signature")
	}
	return a, nil
}

// Verifier checks admin API requests.
type Verifier struct {
	Keys   Keyring
	Region string
	// Open lists path prefixes served without a signature (e.g.
	// "/metrics"); empty by default.
	Open []string
	// Now is the clock; default time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// Principal is who signed a request.
type Principal struct{ AccessKey string }

type principalKey struct{}

// PrincipalOf returns the authenticated caller of a request handled behind
// Wrap.
func PrincipalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// WithPrincipal marks ctx as authenticated as p, for requests that were
// authenticated by other means than a signature (the web console's
// session cookie, which is itself derived from an admin's secret).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// Wrap returns h behind the verifier.
func (v *Verifier) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range v.Open {
			if r.URL.Path == p || strings.HasPrefix(r.URL.Path, strings.TrimSuffix(p, "/")+"/") {
				h.ServeHTTP(w, r)
				return
			}
		}
		p, err := v.Verify(r)
		if err != nil {
			var ae *Error
			if !errors.As(err, &ae) {
				ae = forbidden("AccessDenied", err.Error())
			}
			v.log().Warn("admin request refused", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path,
				"code", ae.Code, "reason", ae.Reason)
			w.Header().Set("Content-Type", "application/json")
			if ae.Status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", algorithm)
			}
			w.WriteHeader(ae.Status)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": ae.Reason, "code": ae.Code})
			return
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func (v *Verifier) log() *slog.Logger {
	if v.Log != nil {
		return v.Log
	}
	return slog.Default()
}

func (v *Verifier) region() string {
	if v.Region != "" {
		return v.Region
	}
	return DefaultRegion
}

// Verify authenticates r. A body whose SHA-256 the client signed (sent as
// X-Amz-Content-Sha256, or computed here when the header is absent) is
// read, up to 1 MiB, and compared before the handler runs; the handler
// gets the verified bytes. Checking at EOF instead would miss handlers
// that stop early (a JSON decoder stops after the first value).
func (v *Verifier) Verify(r *http.Request) (Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return Principal{}, unauthenticated("the admin API needs a signed request: set TERRACE_ACCESS_KEY and TERRACE_SECRET_KEY (or the AWS_* variables) to an admin's keys")
	}
	a, err := parseAuthorization(h)
	if err != nil {
		return Principal{}, unauthenticated(err.Error())
	}
	if a.service != Service {
		return Principal{}, forbidden("SignatureDoesNotMatch", fmt.Sprintf("credential scope names service %q, want %q", a.service, Service))
	}
	if a.region != v.region() {
		return Principal{}, forbidden("SignatureDoesNotMatch", fmt.Sprintf("credential scope names region %q, this node is in %q", a.region, v.region()))
	}
	signed := map[string]bool{}
	for _, name := range a.signedHeaders {
		signed[name] = true
	}
	for _, must := range []string{"host", "x-amz-date"} {
		if !signed[must] {
			return Principal{}, forbidden("AccessDenied", "signed headers must include "+must)
		}
	}
	when, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return Principal{}, forbidden("AccessDenied", "missing or malformed X-Amz-Date")
	}
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	if skew := now().Sub(when); skew > MaxSkew || skew < -MaxSkew {
		return Principal{}, forbidden("RequestTimeTooSkewed", fmt.Sprintf("request time %s is more than %s from the server's", when.Format(time.RFC3339), MaxSkew))
	}
	if when.Format("20060102") != a.date {
		return Principal{}, forbidden("SignatureDoesNotMatch", "credential date differs from X-Amz-Date")
	}
	key, ok := v.Keys.Lookup(a.accessKey)
	if !ok {
		return Principal{}, forbidden("InvalidAccessKeyId", "unknown access key "+a.accessKey)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case payload == "":
		// Plain SigV4 (curl --aws-sigv4, awscurl): the signature covers
		// the body's hash, which the server computes.
		if payload, err = bodyHash(r); errors.Is(err, errBodyTooLarge) {
			return Principal{}, forbidden("AccessDenied", fmt.Sprintf("bodies over %d bytes need X-Amz-Content-Sha256: %s", maxHashedBody, UnsignedPayload))
		} else if err != nil {
			return Principal{}, forbidden("AccessDenied", err.Error())
		}
	case payload != UnsignedPayload:
		if b, err := hex.DecodeString(payload); err != nil || len(b) != sha256.Size {
			return Principal{}, forbidden("AccessDenied", "X-Amz-Content-Sha256 must be a SHA-256 hex digest or "+UnsignedPayload)
		}
		if !signed["x-amz-content-sha256"] {
			return Principal{}, forbidden("AccessDenied", "X-Amz-Content-Sha256 must be a signed header")
		}
	}
	// Re-sign a copy that carries exactly the headers the client signed.
	clone, err := http.NewRequestWithContext(r.Context(), r.Method, requestURL(r), nil)
	if err != nil {
		return Principal{}, forbidden("AccessDenied", "malformed request URL")
	}
	clone.Host = r.Host
	for name := range signed {
		switch name {
		case "host":
		case "content-length":
			clone.ContentLength = r.ContentLength
		default:
			vals := r.Header.Values(name)
			if len(vals) == 0 {
				return Principal{}, forbidden("SignatureDoesNotMatch", "signed header "+name+" is missing")
			}
			for _, val := range vals {
				clone.Header.Add(name, val)
			}
		}
	}
	clone.Header.Del("Authorization")
	if err := v4.NewSigner().SignHTTP(r.Context(), aws.Credentials{AccessKeyID: a.accessKey, SecretAccessKey: key.Secret},
		clone, payload, Service, a.region, when); err != nil {
		return Principal{}, forbidden("AccessDenied", err.Error())
	}
	want, err := parseAuthorization(clone.Header.Get("Authorization"))
	if err != nil || !hmac.Equal([]byte(want.signature), []byte(a.signature)) ||
		strings.Join(want.signedHeaders, ";") != strings.Join(a.signedHeaders, ";") {
		return Principal{}, forbidden("SignatureDoesNotMatch", "the request signature does not match (wrong secret key, or the request was altered)")
	}
	if !key.Admin {
		return Principal{}, forbidden("AccessDenied", "access key "+a.accessKey+" is not an admin")
	}
	if payload != UnsignedPayload && r.Header.Get("X-Amz-Content-Sha256") != "" {
		got, err := bodyHash(r)
		switch {
		case errors.Is(err, errBodyTooLarge):
			return Principal{}, forbidden("AccessDenied", fmt.Sprintf("a signed body hash covers bodies up to %d bytes; send larger bodies as %s", maxHashedBody, UnsignedPayload))
		case err != nil:
			return Principal{}, forbidden("AccessDenied", err.Error())
		case got != payload:
			return Principal{}, forbidden("SignatureDoesNotMatch", ErrBodyAltered.Error())
		}
	}
	return Principal{AccessKey: a.accessKey}, nil
}

// errBodyTooLarge: a body over maxHashedBody cannot be verified up front.
var errBodyTooLarge = errors.New("body too large to hash")

// bodyHash reads a body of up to 1 MiB, puts the bytes back for the
// handler, and returns their SHA-256 (hex).
func bodyHash(r *http.Request) (string, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return emptySHA256, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxHashedBody+1))
	if err != nil {
		return "", fmt.Errorf("read body: %w", err)
	}
	if len(b) > maxHashedBody {
		return "", errBodyTooLarge
	}
	r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// requestURL is the absolute URL the client signed.
func requestURL(r *http.Request) string {
	u := *r.URL
	u.Scheme = "http"
	u.Host = r.Host
	return u.String()
}

// ErrBodyAltered is the refusal of a request whose body does not match
// the SHA-256 it was signed with.
var ErrBodyAltered = errors.New("adminauth: request body does not match its signed SHA-256")

// Sign signs req for the admin API. Bodies of known length up to 1 MiB
// with GetBody are hashed into the signature; others are sent as
// UNSIGNED-PAYLOAD.
func Sign(req *http.Request, accessKey, secretKey, region string, now time.Time) error {
	if region == "" {
		region = DefaultRegion
	}
	payload := emptySHA256
	if req.Body != nil && req.Body != http.NoBody {
		payload = UnsignedPayload
		if req.GetBody != nil && req.ContentLength >= 0 && req.ContentLength <= maxHashedBody {
			rc, err := req.GetBody()
			if err != nil {
				return err
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			payload = hex.EncodeToString(sum[:])
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
	}
	req.Header.Set("X-Amz-Content-Sha256", payload)
	return v4.NewSigner().SignHTTP(req.Context(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		req, payload, Service, region, now.UTC())
}

// Transport signs every request it sends.
type Transport struct {
	Base                 http.RoundTripper // default http.DefaultTransport
	AccessKey, SecretKey string
	Region               string
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // RoundTrippers must not modify the caller's request
	if err := Sign(req, t.AccessKey, t.SecretKey, t.Region, time.Now()); err != nil {
		return nil, err
	}
	base := t.Base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}

// Client returns an http.Client that signs with the given keys.
func Client(accessKey, secretKey string) *http.Client {
	return &http.Client{Transport: &Transport{AccessKey: accessKey, SecretKey: secretKey}}
}
