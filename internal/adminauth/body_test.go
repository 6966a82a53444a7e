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
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// A captured signed request replayed with another body of the same
// length: a handler that decodes JSON (the orphan sweep's
// /v1/egroups/held, the policy test) stops after the first value and never
// reads to EOF, so the body must be checked before the handler runs.
func TestAlteredBodyRefusedBeforeTheHandler(t *testing.T) {
	var got map[string]any
	ran := false
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ran = true
		if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
			http.Error(w, err.Error(), 400)
		}
	})
	v := &Verifier{Keys: StaticKeyring{"root": {Secret: "root-secret", Admin: true}}}
	ts := httptest.NewServer(v.Wrap(h))
	defer ts.Close()
	send := func(signedBody, sentBody []byte) (int, string) {
		t.Helper()
		ran, got = false, nil
		req, _ := http.NewRequest("POST", ts.URL+"/v1/egroups/held", bytes.NewReader(signedBody))
		if err := Sign(req, "root", "root-secret", "", time.Now()); err != nil {
			t.Fatal(err)
		}
		// Replay: same headers (signature, X-Amz-Content-Sha256), new body.
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sentBody)), int64(len(sentBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if st, body := send([]byte(`{"ids":[1]}`), []byte(`{"ids":[1]}`)); st != 200 || !ran || got["ids"] == nil {
		t.Fatalf("intact body: %d %s, handler ran %v and decoded %v", st, body, ran, got)
	}
	st, body := send([]byte(`{"ids":[1]}`), []byte(`{"ids":[9]}`)) // same length: Content-Length is signed
	if st != http.StatusForbidden || ran || !strings.Contains(body, ErrBodyAltered.Error()) {
		t.Errorf("altered body: %d %s, handler ran %v (decoded %v); want 403 before the handler", st, body, ran, got)
	}
	// Trailing bytes after the first JSON value are part of the body too.
	if st, body := send([]byte(`{"ids":[1]} `), []byte(`{"ids":[1]}x`)); st != http.StatusForbidden || ran {
		t.Errorf("altered trailing bytes: %d %s, handler ran %v", st, body, ran)
	}
	// A body signed as empty may not carry bytes.
	if st, body := send(nil, []byte(`{"ids":[9]}`)); st != http.StatusForbidden || ran {
		t.Errorf("body added to a request signed without one: %d %s, handler ran %v", st, body, ran)
	}
}

// A signed body hash covers bodies up to 1 MiB, the most the server
// verifies before the handler; larger bodies go as UNSIGNED-PAYLOAD (the
// Transport does that by itself).
func TestSignedBodyHashOverTheBoundRefused(t *testing.T) {
	s := newServer(t, nil)
	big := bytes.Repeat([]byte("x"), maxHashedBody+1)
	req, _ := http.NewRequest("PUT", s.URL+"/v1/data/b/k", bytes.NewReader(big))
	if err := Sign(req, "root", "root-secret-123", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	if p := req.Header.Get("X-Amz-Content-Sha256"); p != UnsignedPayload {
		t.Fatalf("Sign hashed a %d-byte body: %s", len(big), p)
	}
	// Sign it as a third-party client might: with the digest.
	req, _ = http.NewRequest("PUT", s.URL+"/v1/data/b/k", bytes.NewReader(big))
	sum := sha256.Sum256(big)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: "root", SecretAccessKey: "root-secret-123"},
		req, hex.EncodeToString(sum[:]), Service, DefaultRegion, time.Now()); err != nil {
		t.Fatal(err)
	}
	if st, code, body := do(t, req); st != 403 || code != "AccessDenied" || !strings.Contains(body, UnsignedPayload) {
		t.Errorf("digest-signed %d-byte body: %d %s (%d-byte answer), want 403 AccessDenied naming %s", len(big), st, code, len(body), UnsignedPayload)
	}
	// Exactly 1 MiB is verified and reaches the handler whole.
	full := big[:maxHashedBody]
	if st, _, body := do(t, signed(t, "PUT", s.URL+"/v1/data/b/k", full, "root", "root-secret-123", time.Now())); st != 200 || len(body) != len(full) {
		t.Errorf("digest-signed 1 MiB body: %d, echoed %d bytes", st, len(body))
	}
}
