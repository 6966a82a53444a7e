package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// A session token is
//
//	v1.<access key, base64url>.<expiry, unix seconds>.<nonce, base64url>.<mac, base64url>
//
// where mac = HMAC-SHA256(sessionKey(secret), "v1|" + access key + "|" +
// expiry + "|" + nonce) and sessionKey(secret) = HMAC-SHA256(secret,
// sessionLabel). The server keeps no session table: it verifies a token by
// looking the access key up in the admin keyring and recomputing the MAC,
// so a token stops working when it expires, when the key is removed or
// loses the admin role, or when its secret is rotated. Logout revokes the
// nonce until the token would have expired anyway.
const (
	tokenVersion = "v1"
	sessionLabel = "terrace-console-session/v1"
	csrfLabel    = "terrace-console-csrf/v1"
)

// b64 decodes token parts, refusing non-canonical encodings.
var b64 = base64.RawURLEncoding.Strict()

// Errors of session verification (all mean "log in again").
var (
	ErrNoSession      = errors.New("console: not logged in")
	ErrBadSession     = errors.New("console: malformed or forged session")
	ErrSessionExpired = errors.New("console: session expired")
	ErrSessionRevoked = errors.New("console: session ended (logged out)")
	ErrNotAdmin       = errors.New("console: the key is unknown or not an admin's")
)

// Session is a verified session.
type Session struct {
	AccessKey string
	Expires   time.Time
	nonce     string
	key       []byte // sessionKey of the secret the token was made with
}

// CSRF is the anti-forgery token that state-changing console requests
// and every admin API request must echo in the X-Terrace-CSRF header. It is derived from the session,
// so only a page that could read the session's own API (same origin) can
// know it.
func (s Session) CSRF() string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(csrfLabel + "|" + s.nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sessions issues and verifies tokens against a keyring.
type sessions struct {
	keys adminauth.Keyring
	ttl  time.Duration
	now  func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → token expiry (dropped after it)
}

func sessionKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(sessionLabel))
	return m.Sum(nil)
}

func tokenMAC(key []byte, accessKey string, expiry int64, nonce string) []byte {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s|%s|%d|%s", tokenVersion, accessKey, expiry, nonce)
	return m.Sum(nil)
}

// login checks an access/secret key pair (constant-time on the secret)
// and returns a token for it.
func (s *sessions) login(accessKey, secret string) (string, Session, error) {
	k, ok := s.keys.Lookup(accessKey)
	// Compare even for unknown keys so the time taken does not tell
	// which access keys exist.
	match := subtle.ConstantTimeCompare([]byte(k.Secret), []byte(secret)) == 1
	if !ok || !match || secret == "" {
		return "", Session{}, errors.New("console: wrong access key or secret key")
	}
	if !k.Admin {
		return "", Session{}, ErrNotAdmin
	}
	var nb [16]byte
	if _, err := rand.Read(nb[:]); err != nil {
		return "", Session{}, err
	}
	nonce := base64.RawURLEncoding.EncodeToString(nb[:])
	exp := s.now().Add(s.ttl).Unix()
	key := sessionKey(k.Secret)
	return mintToken(key, accessKey, exp, nonce), Session{AccessKey: accessKey, Expires: time.Unix(exp, 0), nonce: nonce, key: key}, nil
}

// mintToken encodes a token (see the format above).
func mintToken(key []byte, accessKey string, exp int64, nonce string) string {
	mac := tokenMAC(key, accessKey, exp, nonce)
	return strings.Join([]string{tokenVersion, base64.RawURLEncoding.EncodeToString([]byte(accessKey)),
		strconv.FormatInt(exp, 10), nonce, base64.RawURLEncoding.EncodeToString(mac)}, ".")
}

// verify checks a token.
func (s *sessions) verify(tok string) (Session, error) {
	if tok == "" {
		return Session{}, ErrNoSession
	}
	if len(tok) > 1024 {
		return Session{}, ErrBadSession
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 5 || parts[0] != tokenVersion {
		return Session{}, ErrBadSession
	}
	// Strict decoding: a non-canonical encoding of the same bytes (other
	// trailing bits) is a different cookie and is refused, so every
	// session has exactly one token (found by FuzzSessionVerify).
	ak, err := b64.DecodeString(parts[1])
	if err != nil || len(ak) == 0 {
		return Session{}, ErrBadSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return Session{}, ErrBadSession
	}
	nonce := parts[3]
	if _, err := b64.DecodeString(nonce); err != nil || nonce == "" {
		return Session{}, ErrBadSession
	}
	mac, err := b64.DecodeString(parts[4])
	if err != nil {
		return Session{}, ErrBadSession
	}
	k, ok := s.keys.Lookup(string(ak))
	if !ok {
		return Session{}, ErrNotAdmin
	}
	key := sessionKey(k.Secret)
	if !hmac.Equal(mac, tokenMAC(key, string(ak), exp, nonce)) {
		return Session{}, ErrBadSession
	}
	if !k.Admin {
		return Session{}, ErrNotAdmin
	}
	now := s.now()
	if now.Unix() >= exp {
		return Session{}, ErrSessionExpired
	}
	s.mu.Lock()
	_, gone := s.revoked[nonce]
	s.mu.Unlock()
	if gone {
		return Session{}, ErrSessionRevoked
	}
	return Session{AccessKey: string(ak), Expires: time.Unix(exp, 0), nonce: nonce, key: key}, nil
}

// revoke ends a session before its expiry.
func (s *sessions) revoke(sess Session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.revoked == nil {
		s.revoked = map[string]time.Time{}
	}
	now := s.now()
	for n, exp := range s.revoked {
		if now.After(exp) {
			delete(s.revoked, n)
		}
	}
	s.revoked[sess.nonce] = sess.Expires
}

// loginLimiter slows password guessing: after maxFailures failed logins
// from one client address within window, further attempts are refused
// until the window passes. It holds at most maxClients addresses.
type loginLimiter struct {
	mu       sync.Mutex
	failures map[string][]time.Time
}

const (
	loginMaxFailures = 10
	loginWindow      = 5 * time.Minute
	loginMaxClients  = 10000
)

func (l *loginLimiter) recent(addr string, now time.Time) []time.Time {
	var keep []time.Time
	for _, t := range l.failures[addr] {
		if now.Sub(t) < loginWindow {
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		delete(l.failures, addr)
	} else {
		l.failures[addr] = keep
	}
	return keep
}

// allowed reports whether addr may try to log in now.
func (l *loginLimiter) allowed(addr string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == nil {
		return true
	}
	return len(l.recent(addr, now)) < loginMaxFailures
}

// fail records a failed login.
func (l *loginLimiter) fail(addr string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failures == nil {
		l.failures = map[string][]time.Time{}
	}
	if len(l.failures) >= loginMaxClients {
		for a := range l.failures {
			l.recent(a, now)
		}
		if len(l.failures) >= loginMaxClients {
			return // under a flood: stop tracking new addresses rather than grow
		}
	}
	l.failures[addr] = append(l.recent(addr, now), now)
}
