package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// csrfTransport is what the console's JavaScript sends: the session's
// X-Terrace-CSRF token on every request (the cookie comes from the jar).
type csrfTransport struct{ token string }

func (c csrfTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Terrace-CSRF", c.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestConsoleSessionOnRealNode: the console on a real node's admin
// handler refuses everything but its login page and assets without a
// session, logs an admin in, serves the admin API to the session, refuses
// state changes without the CSRF token or from another origin, and leaves
// the signed admin API as strict as before.
func TestConsoleSessionOnRealNode(t *testing.T) {
	n := openNode(t, nil)
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	plain := &http.Client{CheckRedirect: noRedirect}

	for path, want := range map[string]string{"/": "/console/", "/console": "/console/", "/console/": "/console/login"} {
		resp, err := plain.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != want {
			t.Errorf("GET %s: %d → %q, want a redirect to %s", path, resp.StatusCode, loc, want)
		}
	}
	for path, want := range map[string]int{"/console/login": 200, "/console/static/app.js": 200, "/console/static/vendor/uPlot.iife.min.js": 200,
		"/console/api/session": 401, "/console/api/v1/status": 401, "/console/api/history": 401, "/console/api/events": 401,
		"/v1/status": 401} {
		if got := status(t, plain, s.URL+path); got != want {
			t.Errorf("unauthenticated GET %s: %d, want %d", path, got, want)
		}
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, CheckRedirect: noRedirect}
	post := func(path string, form url.Values, hdr map[string]string) *http.Response {
		req, _ := http.NewRequest("POST", s.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := browser.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	good := url.Values{"access_key": {n.Config.RootUser}, "secret_key": {n.Config.RootPassword}}
	if r := post("/console/login", url.Values{"access_key": {n.Config.RootUser}, "secret_key": {"nope"}}, nil); r.StatusCode != 401 || len(jar.Cookies(mustURL(s.URL+"/console/"))) != 0 {
		t.Fatalf("wrong secret: %d, cookies %v", r.StatusCode, jar.Cookies(mustURL(s.URL+"/console/")))
	}
	if r := post("/console/login", good, map[string]string{"Origin": "http://evil.example"}); r.StatusCode != 403 {
		t.Errorf("cross-site login post: %d, want 403", r.StatusCode)
	}
	if r := post("/console/login", good, nil); r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/console/" {
		t.Fatalf("login: %d → %q", r.StatusCode, r.Header.Get("Location"))
	}
	ck := jar.Cookies(mustURL(s.URL + "/console/"))
	if len(ck) != 1 || strings.Contains(ck[0].Value, n.Config.RootPassword) {
		t.Fatalf("session cookie %v", ck)
	}
	// The session reaches the console and the admin API through it, and
	// nothing else: the signed API still wants a signature.
	var sess struct {
		AccessKey string `json:"access_key"`
		CSRF      string `json:"csrf"`
	}
	getJSON(t, browser, s.URL+"/console/api/session", &sess)
	if sess.AccessKey != n.Config.RootUser || sess.CSRF == "" {
		t.Fatalf("session %+v", sess)
	}
	// The admin API through the console wants the token on reads too; the
	// console's JavaScript sends it on every request.
	if got := status(t, browser, s.URL+"/console/api/v1/status"); got != 403 {
		t.Errorf("admin API read through the console without CSRF: %d, want 403", got)
	}
	app := &http.Client{Jar: jar, CheckRedirect: noRedirect, Transport: csrfTransport{sess.CSRF}}
	var st Status
	getJSON(t, app, s.URL+"/console/api/v1/status", &st)
	if st.Node != n.Config.NodeID || len(st.Devices) != 2 {
		t.Errorf("status through the console: %+v", st)
	}
	n.sampler.Take(context.Background(), time.Now().Add(-time.Second))
	n.sampler.Take(context.Background(), time.Now())
	var hist struct {
		Capacity int `json:"capacity"`
		Samples  []struct {
			Time time.Time `json:"time"`
		} `json:"samples"`
	}
	getJSON(t, browser, s.URL+"/console/api/history", &hist)
	if hist.Capacity != DefaultConsoleSamples || len(hist.Samples) != 2 {
		t.Fatalf("history: capacity %d, %d samples", hist.Capacity, len(hist.Samples))
	}
	getJSON(t, browser, s.URL+"/console/api/history?since="+url.QueryEscape(hist.Samples[0].Time.Format(time.RFC3339Nano)), &hist)
	if len(hist.Samples) != 1 {
		t.Errorf("history since the first sample: %d samples, want 1", len(hist.Samples))
	}
	if got := status(t, browser, s.URL+"/console/api/history?since=yesterday"); got != 400 {
		t.Errorf("history since=yesterday: %d, want 400", got)
	}
	if got := status(t, browser, s.URL+"/v1/status"); got != 401 {
		t.Errorf("the session cookie opened the signed admin API: %d", got)
	}
	if got := status(t, app, s.URL+"/console/api/v1/buckets/nope"); got != 405 && got != 404 {
		t.Errorf("GET of an unrouted admin path: %d", got)
	}

	// State changes need the CSRF token, from this origin.
	if r := post("/console/api/v1/curator/run?kind=partial", nil, nil); r.StatusCode != 403 {
		t.Errorf("scan without CSRF: %d, want 403", r.StatusCode)
	}
	if r := post("/console/api/v1/curator/run?kind=partial", nil, map[string]string{"X-Terrace-CSRF": sess.CSRF, "Origin": "http://evil.example"}); r.StatusCode != 403 {
		t.Errorf("scan from another origin: %d, want 403", r.StatusCode)
	}
	req, _ := http.NewRequest("PUT", s.URL+"/console/api/v1/buckets/fromconsole", nil)
	req.Header.Set("X-Terrace-CSRF", sess.CSRF)
	if resp, err := browser.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("create bucket through the console: %v %v", resp, err)
	}
	if _, _, err := n.Layer.GetBucket(context.Background(), "fromconsole"); err != nil {
		t.Errorf("the console's bucket does not exist: %v", err)
	}

	// Logout ends the session server-side, even for a copy of the cookie.
	stolen := ck[0].Value
	if r := post("/console/logout", nil, map[string]string{"X-Terrace-CSRF": sess.CSRF}); r.StatusCode != 204 {
		t.Errorf("logout: %d", r.StatusCode)
	}
	req, _ = http.NewRequest("GET", s.URL+"/console/api/session", nil)
	req.AddCookie(&http.Cookie{Name: "terrace_console", Value: stolen})
	if resp, err := plain.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("a logged-out token still works: %v %v", resp, err)
	}
}

func mustURL(s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		panic(err)
	}
	return u
}

func getJSON(t *testing.T, c *http.Client, u string, out any) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s %s", u, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleMetricsAndJobs: the operations metrics the alert rules and
// the Grafana dashboard use are registered with live values, the sampler
// sees the node's devices, and the job endpoints answer.
func TestConsoleMetricsAndJobs(t *testing.T) {
	n := openNode(t, nil)
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "bkt", n.Config.RootUser, model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Layer.Put(ctx, "bkt", "k", strings.NewReader("hello console"), object.PutOptions{Size: 13}); err != nil {
		t.Fatal(err)
	}
	n.sampler.Want() // as a console page or a scrape does
	sm := n.sampler.Take(ctx, time.Now())
	var tiers []string
	for _, ts := range sm.Tiers {
		tiers = append(tiers, ts.Tier)
		if ts.CapacityBytes != 256<<20 {
			t.Errorf("tier %s capacity %d, want 256 MiB", ts.Tier, ts.CapacityBytes)
		}
	}
	if strings.Join(tiers, ",") != "ssd,hdd" || sm.LatencySeconds <= 0 {
		t.Errorf("sample %+v", sm)
	}
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	root := adminauth.Client(n.Config.RootUser, n.Config.RootPassword)
	resp, err := root.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`terrace_device_failed{device="n1/ssd0",tier="ssd"} 0`, `terrace_node_up{node="n1",rack="r1"} 1`,
		`terrace_device_write_bytes_total{device=`, `terrace_tier_hot_bytes{tier="ssd"}`, `terrace_tier_cold_bytes{tier="hdd"}`,
		"terrace_object_client_op_seconds_count 1", "terrace_nodes 1"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	var jobs JobList
	getJSON(t, root, s.URL+"/v1/curator/jobs", &jobs)
	if jobs.Running == nil || jobs.Recent == nil {
		t.Errorf("jobs %+v: want empty lists, not null", jobs)
	}
	if got := status(t, root, s.URL+"/v1/curator/jobs/nonexistent"); got != 404 {
		t.Errorf("unknown job: %d, want 404", got)
	}
}

// FuzzConsoleUnauthenticated sends arbitrary console requests (method,
// path, cookie, form body) without valid credentials to a real node: none
// may crash it or answer 5xx, none reaches the API (2xx under
// /console/api/), and none gets a session cookie.
func FuzzConsoleUnauthenticated(f *testing.F) {
	for _, c := range []struct{ method, path, cookie, body string }{
		{"GET", "/console/", "", ""},
		{"GET", "/console/api/v1/status", "v1.dGVycmFjZQ.99999999999.bm9uY2U.AAAA", ""},
		{"POST", "/console/login", "", "access_key=terrace&secret_key=guess"},
		{"POST", "/console/login", "", "access_key=%ff%fe&secret_key=" + strings.Repeat("a", 5000)},
		{"POST", "/console/api/v1/curator/run?kind=full", "garbage", ""},
		{"GET", "/console/api/history?since=%00", "", ""},
		{"GET", "/console/static/../login", "", ""},
		{"POST", "/console/logout", "v1....", ""},
		{"GET", "/console/api/events", "v1.YWRtaW4.1.x.y", ""},
	} {
		f.Add(c.method, c.path, c.cookie, c.body)
	}
	f.Fuzz(func(t *testing.T, method, path, cookie, body string) {
		fuzzNode.once.Do(func() {
			dir, err := os.MkdirTemp("", "terrace-admin-fuzz-")
			if err != nil {
				fuzzNode.err = err
				return
			}
			fuzzNode.root = dir
			fuzzNode.n, fuzzNode.err = openNodeAt(filepath.Join(dir, "data"), nil)
		})
		if fuzzNode.err != nil {
			t.Fatal(fuzzNode.err)
		}
		switch method {
		case "GET", "PUT", "POST", "DELETE", "HEAD":
		default:
			return
		}
		req, err := http.NewRequest(method, "http://127.0.0.1:9001"+path, strings.NewReader(body))
		if err != nil || !strings.HasPrefix(req.URL.Path, "/console") {
			return
		}
		if strings.Contains(body, "secret_key="+url.QueryEscape(fuzzNode.n.Config.RootPassword)) {
			return // the right secret: a real login
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if cookie != "" {
			req.Header.Set("Cookie", "terrace_console="+cookie)
		}
		rec := httptest.NewRecorder()
		fuzzNode.n.AdminHandler().ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, rec.Code, rec.Body.String())
		}
		if strings.HasPrefix(req.URL.Path, "/console/api/") && rec.Code < 300 {
			t.Fatalf("%s %s with cookie %q reached the API: %d", method, path, cookie, rec.Code)
		}
		for _, c := range rec.Result().Cookies() {
			if c.Value != "" {
				t.Fatalf("%s %s set a session cookie %q", method, path, c.Value)
			}
		}
	})
}
