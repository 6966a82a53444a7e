package adminauth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// echo answers with the request body it read, or 500 if reading failed.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p, _ := PrincipalOf(r.Context())
	w.Header().Set("X-Principal", p.AccessKey)
	w.Write(b)
})

func newServer(t *testing.T, now func() time.Time) *httptest.Server {
	t.Helper()
	v := &Verifier{
		Keys: StaticKeyring{
			"root": {Secret: "root-secret-123", Admin: true},
			"user": {Secret: "user-secret-123"},
		},
		Open: []string{"/metrics"},
		Now:  now,
	}
	s := httptest.NewServer(v.Wrap(echo))
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, req *http.Request) (int, string, string) {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	code := ""
	var e struct{ Code string }
	if json.Unmarshal(b, &e) == nil {
		code = e.Code
	}
	return resp.StatusCode, code, string(b)
}

func signed(t *testing.T, method, u string, body []byte, ak, sk string, at time.Time) *http.Request {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(req, ak, sk, "", at); err != nil {
		t.Fatal(err)
	}
	return req
}

func TestVerify(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	s := newServer(t, func() time.Time { return now })
	base := s.URL + "/v1/object/locate?bucket=b&key=" + url.QueryEscape("a key/with ünïcode")

	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"signed by an admin", func() *http.Request { return signed(t, "GET", base, nil, "root", "root-secret-123", now) }, 200, ""},
		{"signed body", func() *http.Request {
			return signed(t, "PUT", s.URL+"/v1/x", []byte(`{"a":1}`), "root", "root-secret-123", now)
		}, 200, ""},
		{"path with escapes", func() *http.Request {
			return signed(t, "PUT", s.URL+"/v1/data/b/"+url.PathEscape("dir/k ey%2F+&=")+"?vector=any%3D2", nil, "root", "root-secret-123", now)
		}, 200, ""},
		{"unsigned", func() *http.Request { r, _ := http.NewRequest("GET", base, nil); return r }, 401, "Unauthenticated"},
		{"not sigv4", func() *http.Request {
			r, _ := http.NewRequest("GET", base, nil)
			r.Header.Set("Authorization", "Bearer abc")
			return r
		}, 401, "Unauthenticated"},
		{"wrong secret", func() *http.Request { return signed(t, "GET", base, nil, "root", "guessed-secret", now) }, 403, "SignatureDoesNotMatch"},
		{"unknown key", func() *http.Request { return signed(t, "GET", base, nil, "nobody", "x-secret-1234", now) }, 403, "InvalidAccessKeyId"},
		{"not an admin", func() *http.Request { return signed(t, "GET", base, nil, "user", "user-secret-123", now) }, 403, "AccessDenied"},
		{"too old (replay)", func() *http.Request {
			return signed(t, "GET", base, nil, "root", "root-secret-123", now.Add(-MaxSkew-time.Second))
		}, 403, "RequestTimeTooSkewed"},
		{"from the future", func() *http.Request {
			return signed(t, "GET", base, nil, "root", "root-secret-123", now.Add(MaxSkew+time.Second))
		}, 403, "RequestTimeTooSkewed"},
		{"query altered", func() *http.Request {
			r := signed(t, "GET", base, nil, "root", "root-secret-123", now)
			r.URL.RawQuery = strings.Replace(r.URL.RawQuery, "bucket=b", "bucket=c", 1)
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"method altered", func() *http.Request {
			r := signed(t, "GET", base, nil, "root", "root-secret-123", now)
			r.Method = "DELETE"
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"path altered", func() *http.Request {
			r := signed(t, "POST", s.URL+"/v1/nodes/n2/drain", nil, "root", "root-secret-123", now)
			r.URL.Path = "/v1/nodes/n3/drain"
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"date header altered", func() *http.Request {
			r := signed(t, "GET", base, nil, "root", "root-secret-123", now)
			r.Header.Set("X-Amz-Date", now.Add(time.Minute).Format("20060102T150405Z"))
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"body altered", func() *http.Request {
			r := signed(t, "PUT", s.URL+"/v1/x", []byte(`{"drain":"n2"}`), "root", "root-secret-123", now)
			r.Body = io.NopCloser(strings.NewReader(`{"drain":"n3"}`))
			return r
		}, 403, "SignatureDoesNotMatch"},
		{"open path", func() *http.Request { r, _ := http.NewRequest("GET", s.URL+"/metrics", nil); return r }, 200, ""},
		{"prefix of an open path is not open", func() *http.Request { r, _ := http.NewRequest("GET", s.URL+"/metricsX", nil); return r }, 401, "Unauthenticated"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, code, body := do(t, c.req())
			if st != c.status || code != c.code {
				t.Fatalf("got %d %q (%s), want %d %q", st, code, strings.TrimSpace(body), c.status, c.code)
			}
			if c.name == "body altered" && !strings.Contains(body, ErrBodyAltered.Error()) {
				t.Fatalf("altered body not detected: %s", body)
			}
		})
	}
}

// TestTransport: a streamed body of unknown length goes out as
// UNSIGNED-PAYLOAD and still authenticates; a small body is hashed.
func TestTransport(t *testing.T) {
	s := newServer(t, nil)
	c := Client("root", "root-secret-123")
	big := bytes.Repeat([]byte("x"), 3<<20)
	for _, body := range [][]byte{nil, []byte("small"), big} {
		var r io.Reader
		if body != nil {
			r = io.MultiReader(bytes.NewReader(body)) // no GetBody: unknown to the transport
		}
		req, _ := http.NewRequest("PUT", s.URL+"/v1/data/b/k", r)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, body) || resp.Header.Get("X-Principal") != "root" {
			t.Fatalf("%d bytes: status %d, echoed %d bytes, principal %q", len(body), resp.StatusCode, len(got), resp.Header.Get("X-Principal"))
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AK/20261123/us-east-1/terrace-admin/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32))
	f.Add("AWS4-HMAC-SHA256 Credential=/////, SignedHeaders=, Signature=")
	f.Add("Bearer x")
	f.Add("AWS4-HMAC-SHA256 ")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseAuthorization(h)
		if err == nil && (a.accessKey == "" || len(a.signature) != 64 || len(a.signedHeaders) == 0) {
			t.Fatalf("accepted an incomplete header %q: %+v", h, a)
		}
	})
}

// TestPlainSigV4: tools that sign the body without sending
// X-Amz-Content-Sha256 (curl --aws-sigv4, awscurl) authenticate; the
// server hashes the body, so an altered body does not.
func TestPlainSigV4(t *testing.T) {
	now := time.Now()
	s := newServer(t, nil)
	sign := func(method, u, body string) *http.Request {
		var r io.Reader
		if body != "" {
			r = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, u, r)
		sum := sha256.Sum256([]byte(body))
		if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret-123"},
			req, hex.EncodeToString(sum[:]), Service, DefaultRegion, now); err != nil {
			t.Fatal(err)
		}
		return req
	}
	if st, _, b := do(t, sign("GET", s.URL+"/v1/status", "")); st != 200 {
		t.Fatalf("plain SigV4 GET: %d %s", st, b)
	}
	if st, _, b := do(t, sign("POST", s.URL+"/v1/x", `{"a":1}`)); st != 200 || b != `{"a":1}` {
		t.Fatalf("plain SigV4 POST: %d %s", st, b)
	}
	req := sign("POST", s.URL+"/v1/x", `{"a":1}`)
	req.Body = io.NopCloser(strings.NewReader(`{"a":2}`))
	if st, code, _ := do(t, req); st != 403 || code != "SignatureDoesNotMatch" {
		t.Fatalf("altered body under plain SigV4: %d %s", st, code)
	}
}
