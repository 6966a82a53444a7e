package console

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func testSessions(keys adminauth.StaticKeyring) (*sessions, *clock) {
	c := &clock{t: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)}
	return &sessions{keys: keys, ttl: time.Hour, now: c.now}, c
}

func TestSessionLoginAndVerify(t *testing.T) {
	keys := adminauth.StaticKeyring{"admin": {Secret: "s3cret", Admin: true}, "user": {Secret: "usersecret"}}
	s, clk := testSessions(keys)

	for _, c := range []struct{ ak, sk string }{{"admin", "wrong"}, {"admin", ""}, {"nobody", "s3cret"}, {"", ""}} {
		if _, _, err := s.login(c.ak, c.sk); err == nil {
			t.Errorf("login %q/%q succeeded", c.ak, c.sk)
		}
	}
	if _, _, err := s.login("user", "usersecret"); !errors.Is(err, ErrNotAdmin) {
		t.Errorf("non-admin login: %v, want ErrNotAdmin", err)
	}

	tok, sess, err := s.login("admin", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tok, "s3cret") {
		t.Fatal("the token carries the secret")
	}
	got, err := s.verify(tok)
	if err != nil || got.AccessKey != "admin" || !got.Expires.Equal(sess.Expires) || got.CSRF() != sess.CSRF() {
		t.Fatalf("verify: %+v %v", got, err)
	}
	tok2, sess2, _ := s.login("admin", "s3cret")
	if tok2 == tok || sess2.CSRF() == sess.CSRF() {
		t.Error("two logins share a token or a CSRF token")
	}

	// Every part of the token is covered by the MAC.
	parts := strings.Split(tok, ".")
	for i := range parts {
		for _, repl := range []string{"", "x", parts[i] + "A", strings.ToUpper(parts[i])} {
			if repl == parts[i] {
				continue
			}
			p := append([]string(nil), parts...)
			p[i] = repl
			if _, err := s.verify(strings.Join(p, ".")); err == nil {
				t.Errorf("token with part %d = %q accepted", i, repl)
			}
		}
	}
	if _, err := s.verify(""); !errors.Is(err, ErrNoSession) {
		t.Errorf("empty token: %v", err)
	}

	// Expiry.
	clk.t = clk.t.Add(time.Hour)
	if _, err := s.verify(tok); !errors.Is(err, ErrSessionExpired) {
		t.Errorf("after the TTL: %v, want ErrSessionExpired", err)
	}
	clk.t = clk.t.Add(-30 * time.Minute)

	// Logout revokes this session only.
	s.revoke(got)
	if _, err := s.verify(tok); !errors.Is(err, ErrSessionRevoked) {
		t.Errorf("after logout: %v, want ErrSessionRevoked", err)
	}
	if _, err := s.verify(tok2); err != nil {
		t.Errorf("another session ended with the first: %v", err)
	}

	// Rotating the secret ends every session made with the old one;
	// losing the admin role ends them too.
	keys["admin"] = adminauth.Key{Secret: "rotated", Admin: true}
	if _, err := s.verify(tok2); !errors.Is(err, ErrBadSession) {
		t.Errorf("after rotation: %v, want ErrBadSession", err)
	}
	tok3, _, err := s.login("admin", "rotated")
	if err != nil {
		t.Fatal(err)
	}
	keys["admin"] = adminauth.Key{Secret: "rotated"}
	if _, err := s.verify(tok3); !errors.Is(err, ErrNotAdmin) {
		t.Errorf("after losing the admin role: %v, want ErrNotAdmin", err)
	}
	delete(keys, "admin")
	if _, err := s.verify(tok3); !errors.Is(err, ErrNotAdmin) {
		t.Errorf("after the key was removed: %v, want ErrNotAdmin", err)
	}
}

func TestLoginLimiter(t *testing.T) {
	var l loginLimiter
	now := time.Unix(1_800_000_000, 0)
	for i := range loginMaxFailures {
		if !l.allowed("10.0.0.1", now) {
			t.Fatalf("refused after %d failures", i)
		}
		l.fail("10.0.0.1", now)
	}
	if l.allowed("10.0.0.1", now) {
		t.Error("allowed after the maximum of failures")
	}
	if !l.allowed("10.0.0.2", now) {
		t.Error("another address is refused")
	}
	if !l.allowed("10.0.0.1", now.Add(loginWindow)) {
		t.Error("still refused after the window")
	}
}

// FuzzSessionVerify: arbitrary cookies never crash verification and are
// never accepted unless they are a token the server minted.
func FuzzSessionVerify(f *testing.F) {
	keys := adminauth.StaticKeyring{"admin": {Secret: "s3cret", Admin: true}}
	s, clk := testSessions(keys)
	// A fixed nonce: fuzz workers rebuild this setup and must agree on
	// the one valid token.
	tok := mintToken(sessionKey("s3cret"), "admin", clk.t.Add(time.Hour).Unix(), "bm9uY2Vub25jZQ")
	if _, err := s.verify(tok); err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{tok, "", "v1", "v1....", "v1.YWRtaW4.1.bm9uY2U.AAAA", strings.Repeat("v1.", 400),
		tok[:len(tok)-1], "v2" + tok[2:], "v1.YWRtaW4.-1.x.y", "v1.YWRtaW4.99999999999999999999.x.y"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, cookie string) {
		sess, err := s.verify(cookie)
		if err == nil && cookie != tok {
			t.Fatalf("forged token %q accepted as %+v", cookie, sess)
		}
	})
}
