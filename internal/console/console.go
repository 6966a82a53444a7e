package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

//go:embed static
var staticFiles embed.FS

// Prefix is where the console lives on the admin listener.
const Prefix = "/console/"

// cookieName is the session cookie.
const cookieName = "terrace_console"

// csrfHeader carries Session.CSRF on state-changing and admin API requests.
const csrfHeader = "X-Terrace-CSRF"

// DefaultSessionTTL is how long a login lasts.
const DefaultSessionTTL = 12 * time.Hour

// Options configure a console.
type Options struct {
	// Keys are the admin keys a login is checked against (the same
	// keyring the admin API's signatures are verified with).
	Keys adminauth.Keyring
	// API is the admin API's routes without the signature check: the
	// console serves them under /console/api/v1/... to a logged-in
	// browser, as the session's admin.
	API http.Handler
	// Sampler feeds the charts and live updates (nil: no history).
	Sampler *Sampler
	// Node names the node in the page title.
	Node       string
	SessionTTL time.Duration
	Log        *slog.Logger
	Now        func() time.Time
}

// Console is the web console's HTTP handler.
type Console struct {
	opts   Options
	sess   *sessions
	limit  loginLimiter
	static http.Handler
	login  *template.Template
	index  []byte
}

// New returns a console.
func New(o Options) (*Console, error) {
	if o.Keys == nil || o.API == nil {
		return nil, errors.New("console: Keys and API are required")
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sub, err := fs.Sub(staticFiles, "static")
	if err != nil {
		return nil, err
	}
	loginSrc, err := fs.ReadFile(sub, "login.html")
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("login").Parse(string(loginSrc))
	if err != nil {
		return nil, err
	}
	index, err := fs.ReadFile(sub, "index.html")
	if err != nil {
		return nil, err
	}
	c := &Console{opts: o, sess: &sessions{keys: o.Keys, ttl: o.SessionTTL, now: o.Now}, login: tmpl, index: index}
	c.static = http.StripPrefix(Prefix+"static/", http.FileServerFS(sub))
	return c, nil
}

// ServeHTTP routes /console/... requests.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The console's pages never belong in a frame (clickjacking) and
	// never load anything from elsewhere.
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'")
	p := r.URL.Path
	switch {
	case p == strings.TrimSuffix(Prefix, "/"):
		http.Redirect(w, r, Prefix, http.StatusFound)
	case strings.HasPrefix(p, Prefix+"static/"):
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Cache-Control", "no-cache")
		c.static.ServeHTTP(w, r)
	case p == Prefix+"login":
		c.handleLogin(w, r)
	case p == Prefix+"logout":
		c.handleLogout(w, r)
	case strings.HasPrefix(p, Prefix+"api/"):
		c.handleAPI(w, r)
	case p == Prefix:
		if _, err := c.session(r); err != nil {
			http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		_, _ = w.Write(c.index)
	default:
		http.NotFound(w, r)
	}
}

func (c *Console) session(r *http.Request) (Session, error) {
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return Session{}, ErrNoSession
	}
	return c.sess.verify(ck.Value)
}

type loginPage struct {
	Node, Error, AccessKey string
}

func (c *Console) renderLogin(w http.ResponseWriter, status int, page loginPage) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	page.Node = c.opts.Node
	_ = c.login.Execute(w, page)
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (c *Console) handleLogin(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if _, err := c.session(r); err == nil {
			http.Redirect(w, r, Prefix, http.StatusSeeOther)
			return
		}
		c.renderLogin(w, http.StatusOK, loginPage{})
		return
	case http.MethodPost:
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !sameOrigin(r) {
		c.renderLogin(w, http.StatusForbidden, loginPage{Error: "The login form was posted from another site."})
		return
	}
	addr := clientAddr(r)
	now := c.opts.Now()
	if !c.limit.allowed(addr, now) {
		c.opts.Log.Warn("console login refused", "remote", addr, "reason", "too many failed logins")
		c.renderLogin(w, http.StatusTooManyRequests, loginPage{Error: "Too many failed logins from this address; wait a few minutes."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		c.renderLogin(w, http.StatusBadRequest, loginPage{Error: "Malformed login form."})
		return
	}
	ak := strings.TrimSpace(r.PostForm.Get("access_key"))
	tok, sess, err := c.sess.login(ak, r.PostForm.Get("secret_key"))
	if err != nil {
		c.limit.fail(addr, now)
		c.opts.Log.Warn("console login refused", "remote", addr, "access_key", ak, "reason", err.Error())
		msg := "Wrong access key or secret key."
		if errors.Is(err, ErrNotAdmin) {
			msg = "This key is not an admin's: the console needs an admin's keys."
		}
		c.renderLogin(w, http.StatusUnauthorized, loginPage{Error: msg, AccessKey: ak})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: Prefix, Expires: sess.Expires,
		MaxAge: int(c.opts.SessionTTL.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	c.opts.Log.Info("console login", "remote", addr, "access_key", ak, "expires", sess.Expires)
	http.Redirect(w, r, Prefix, http.StatusSeeOther)
}

func (c *Console) handleLogout(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if sess, err := c.session(r); err == nil {
		if !c.csrfOK(r, sess) {
			writeErr(w, http.StatusForbidden, "Forbidden", "missing or wrong "+csrfHeader+" header")
			return
		}
		c.sess.revoke(sess)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: Prefix, MaxAge: -1, HttpOnly: true,
		Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	w.WriteHeader(http.StatusNoContent)
}

// sameOrigin rejects cross-site form posts: a browser sends Origin on
// POSTs; when present it must name this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" && r.Header.Get("Sec-Fetch-Site") == "same-origin" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) csrfOK(r *http.Request, sess Session) bool {
	got := r.Header.Get(csrfHeader)
	return got != "" && got == sess.CSRF() && sameOrigin(r)
}

func writeErr(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]string{"error": msg, "code": code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// handleAPI serves the console's own endpoints and, under api/v1/, the
// admin API as the session's admin.
func (c *Console) handleAPI(w http.ResponseWriter, r *http.Request) {
	sess, err := c.session(r)
	if err != nil {
		writeErr(w, http.StatusUnauthorized, "Unauthenticated", "log in to the console again: "+err.Error())
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, Prefix+"api")
	// State changes need the token, and so does every admin API request,
	// reads included: some admin GETs do work (a Curator map scan), and a
	// page on another port of this host (S3 serves users' HTML) is
	// same-site, so SameSite=Strict alone lets its <img> send the cookie.
	// The console's own reads (session, which hands out the token, history
	// and the event stream) change nothing.
	mutating := r.Method != http.MethodGet && r.Method != http.MethodHead
	if (mutating || strings.HasPrefix(rest, "/v1/")) && !c.csrfOK(r, sess) {
		writeErr(w, http.StatusForbidden, "Forbidden", "missing or wrong "+csrfHeader+" header (reload the page)")
		return
	}
	switch {
	case rest == "/session" && r.Method == http.MethodGet:
		iv := time.Duration(0)
		if c.opts.Sampler != nil {
			iv = c.opts.Sampler.Interval()
		}
		writeJSON(w, http.StatusOK, map[string]any{"access_key": sess.AccessKey, "expires": sess.Expires,
			"csrf": sess.CSRF(), "node": c.opts.Node, "sample_every_ms": iv.Milliseconds()})
	case rest == "/history" && r.Method == http.MethodGet:
		c.handleHistory(w, r)
	case rest == "/events" && r.Method == http.MethodGet:
		c.handleEvents(w, r, sess)
	case strings.HasPrefix(rest, "/v1/"):
		r2 := r.Clone(adminauth.WithPrincipal(r.Context(), adminauth.Principal{AccessKey: sess.AccessKey}))
		r2.URL.Path = rest
		r2.URL.RawPath = ""
		if r.URL.RawPath != "" {
			r2.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, Prefix+"api")
		}
		r2.RequestURI = r2.URL.RequestURI()
		c.opts.API.ServeHTTP(w, r2)
	default:
		writeErr(w, http.StatusNotFound, "NotFound", fmt.Sprintf("no console endpoint %s %s", r.Method, rest))
	}
}

func (c *Console) handleHistory(w http.ResponseWriter, r *http.Request) {
	if c.opts.Sampler == nil {
		writeJSON(w, http.StatusOK, map[string]any{"interval_ms": 0, "samples": []Sample{}})
		return
	}
	var since time.Time
	if s := r.URL.Query().Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			writeErr(w, http.StatusBadRequest, "InvalidArgument", "since must be an RFC 3339 time")
			return
		}
		since = t
	}
	samples := c.opts.Sampler.History(since)
	if samples == nil {
		samples = []Sample{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"interval_ms": c.opts.Sampler.Interval().Milliseconds(),
		"capacity": c.opts.Sampler.Capacity(), "samples": samples})
}

// handleEvents streams every new sample as a server-sent event ("sample")
// while the session lasts; pages refresh what they show on each one.
func (c *Console) handleEvents(w http.ResponseWriter, r *http.Request, sess Session) {
	fl, ok := w.(http.Flusher)
	if !ok || c.opts.Sampler == nil {
		writeErr(w, http.StatusNotImplemented, "NotImplemented", "live updates are not available")
		return
	}
	ch, cancel := c.opts.Sampler.subscribe()
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", c.opts.Sampler.Interval().Milliseconds())
	fl.Flush()
	expire := time.NewTimer(time.Until(sess.Expires))
	defer expire.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-expire.C:
			fmt.Fprint(w, "event: expired\ndata: {}\n\n")
			fl.Flush()
			return
		case sm, ok := <-ch:
			if !ok {
				return // the node is shutting down
			}
			// Re-check: a logout or a rotated secret ends the stream too.
			if _, err := c.session(r); err != nil {
				fmt.Fprint(w, "event: expired\ndata: {}\n\n")
				fl.Flush()
				return
			}
			b, _ := json.Marshal(sm)
			fmt.Fprintf(w, "event: sample\ndata: %s\n\n", b)
			fl.Flush()
		}
	}
}
