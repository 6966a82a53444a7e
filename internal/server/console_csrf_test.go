package server

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// A console session's cookie alone (no X-Terrace-CSRF, as an <img> on a
// page another port of this host serves would send it: same-site, so
// SameSite=Strict does not stop it) must not reach the admin API, even
// with a GET; and no GET of the shared log may fill a position.
func TestConsoleAdminGetsNeedCSRF(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	var resp *http.Response
	var err error
	for i := 0; i < 50; i++ { // the log service needs a moment
		req, _ := http.NewRequest("PUT", s.URL+"/v1/logs/seclog", nil)
		if resp, err = root.Do(req); err == nil && resp.StatusCode/100 == 2 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("create log: %v %d %s", err, resp.StatusCode, b)
	}
	resp.Body.Close()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	form := url.Values{"access_key": {n.Config.RootUser}, "secret_key": {n.Config.RootPassword}}
	if _, err := browser.Post(s.URL+"/console/login", "application/x-www-form-urlencoded", strings.NewReader(form.Encode())); err != nil {
		t.Fatal(err)
	}
	do := func(c *http.Client, method, path string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL+path, nil)
		req.Header.Set("Sec-Fetch-Site", "same-site")
		r, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r.StatusCode, strings.TrimSpace(string(b))
	}
	// What a same-site page's <img src=...> sends: the cookie, no token.
	for _, path := range []string{"/console/api/v1/logs/seclog/entries/3?fill=1", "/console/api/v1/status",
		"/console/api/v1/curator/map?part=egroups/0"} {
		if code, body := do(browser, "GET", path); code != http.StatusForbidden {
			t.Errorf("GET %s with the cookie and no CSRF token: %d %s, want 403", path, code, body)
		}
	}
	// The console's own reads stay open to the session: /session hands out
	// the token.
	var sess struct {
		CSRF string `json:"csrf"`
	}
	code, body := do(browser, "GET", "/console/api/session")
	if code != 200 || json.Unmarshal([]byte(body), &sess) != nil || sess.CSRF == "" {
		t.Fatalf("GET /console/api/session: %d %s", code, body)
	}
	if code, body := do(browser, "GET", "/console/api/history"); code != 200 {
		t.Errorf("GET /console/api/history: %d %s", code, body)
	}
	// With the token, reads work, but a GET still never fills.
	app := &http.Client{Jar: jar, CheckRedirect: noRedirect, Transport: csrfTransport{sess.CSRF}}
	if code, body := do(app, "GET", "/console/api/v1/status"); code != 200 {
		t.Errorf("GET status with the token: %d %s", code, body)
	}
	if code, body := do(app, "GET", "/console/api/v1/logs/seclog/entries/3?fill=1"); code != http.StatusBadRequest || !strings.Contains(body, "POST") {
		t.Errorf("GET ?fill=1 with the token: %d %s, want 400 naming the POST", code, body)
	}
	if code, body := do(root, "GET", "/v1/logs/seclog/entries/3?fill=1"); code != http.StatusBadRequest {
		t.Errorf("signed GET ?fill=1: %d %s, want 400", code, body)
	}
	if code, body := do(root, "GET", "/v1/logs/seclog/entries/3"); code != http.StatusNotFound {
		t.Errorf("position 3 after the refused fills: %d %s, want 404 (not written)", code, body)
	}
	// Filling is the POST, with the token.
	if code, body := do(app, "POST", "/console/api/v1/logs/seclog/fill?pos=3"); code != 200 {
		t.Errorf("POST fill with the token: %d %s", code, body)
	}
	if code, body := do(root, "GET", "/v1/logs/seclog/entries/3"); code != http.StatusGone {
		t.Errorf("position 3 after POST fill: %d %s, want 410", code, body)
	}
}
