package server

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// A signed admin request replayed with another body is refused before the
// handler runs, also by handlers that decode one JSON value and never
// read to EOF (the orphan sweep's question to its peers).
func TestAdminAlteredBodyRefused(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	send := func(signedBody, sentBody string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", s.URL+"/v1/egroups/held", strings.NewReader(signedBody))
		if err := adminauth.Sign(req, n.Config.RootUser, n.Config.RootPassword, "", time.Now()); err != nil {
			t.Fatal(err)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader([]byte(sentBody))), int64(len(sentBody))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(b))
	}
	if st, body := send(`{"ids":[1]}`, `{"ids":[1]}`); st != 200 {
		t.Fatalf("intact body: %d %s", st, body)
	}
	if st, body := send(`{"ids":[1]}`, `{"ids":[9]}`); st != http.StatusForbidden || !strings.Contains(body, "SignatureDoesNotMatch") {
		t.Errorf("altered body: %d %s, want 403 SignatureDoesNotMatch", st, body)
	}
}
