package sse

import (
	"bufio"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Purposes bind a sealed blob to what it protects (GCM associated data):
// a blob sealed for one purpose does not open for another.
const (
	PurposeObjectKey  = "terrace object data key v1"
	PurposeUserSecret = "terrace user secret v1"
)

// ErrUnknownKey means a blob was sealed with a master key the keyring no
// longer (or never) had.
var ErrUnknownKey = errors.New("sse: sealed with a master key this keyring does not have")

// MasterKey is one key of a keyring.
type MasterKey struct {
	ID  string
	Key []byte
}

var keyIDRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// Keyring holds the cluster's master keys: the active one seals, every
// one opens what it sealed. It never prints key material.
type Keyring struct {
	ids  []string // ids[0] is active
	keys map[string][]byte
}

// NewKeyring returns a keyring whose first key is the active one.
func NewKeyring(keys ...MasterKey) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("sse: a keyring needs at least one master key")
	}
	k := &Keyring{keys: map[string][]byte{}}
	for _, mk := range keys {
		if !keyIDRe.MatchString(mk.ID) {
			return nil, fmt.Errorf("sse: master key id %q: use 1-64 letters, digits, '.', '_' or '-'", mk.ID)
		}
		if len(mk.Key) != KeySize {
			return nil, fmt.Errorf("sse: master key %s is %d bytes, want %d", mk.ID, len(mk.Key), KeySize)
		}
		if _, dup := k.keys[mk.ID]; dup {
			return nil, fmt.Errorf("sse: master key id %s listed twice", mk.ID)
		}
		k.ids = append(k.ids, mk.ID)
		k.keys[mk.ID] = append([]byte(nil), mk.Key...)
	}
	return k, nil
}

// ParseKeyring reads the keyring text format: one "ID:BASE64KEY" per
// line, the first one active, older ones after it; blank lines and lines
// starting with # are ignored. Errors never quote key material.
func ParseKeyring(text string) (*Keyring, error) {
	var keys []MasterKey
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		id, b64, ok := strings.Cut(s, ":")
		if !ok {
			return nil, fmt.Errorf("sse: keyring line %d: want ID:BASE64KEY", line)
		}
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			return nil, fmt.Errorf("sse: keyring line %d: key is not base64", line)
		}
		keys = append(keys, MasterKey{ID: strings.TrimSpace(id), Key: key})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("sse: keyring: %w", err)
	}
	return NewKeyring(keys...)
}

// LoadKeyringFile reads a keyring file.
func LoadKeyringFile(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sse: keyring: %w", err)
	}
	k, err := ParseKeyring(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// NewMasterKey returns a random master key with the given ID.
func NewMasterKey(id string) (MasterKey, error) {
	key, err := NewDataKey()
	if err != nil {
		return MasterKey{}, err
	}
	return MasterKey{ID: id, Key: key}, nil
}

// FormatKeyLine is the keyring file line of a master key.
func FormatKeyLine(mk MasterKey) string {
	return mk.ID + ":" + base64.StdEncoding.EncodeToString(mk.Key)
}

// CreateKeyringFile writes a new keyring file (mode 0600) holding one
// fresh key. It refuses to overwrite an existing file.
func CreateKeyringFile(path, id string) (*Keyring, error) {
	mk, err := NewMasterKey(id)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sse: create keyring: %w", err)
	}
	text := "# Terrace master keys: ID:BASE64KEY, the first line is active.\n" + FormatKeyLine(mk) + "\n"
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return nil, fmt.Errorf("sse: create keyring: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("sse: create keyring: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return NewKeyring(mk)
}

// DeriveMasterKey derives a master key from a shared secret (a cluster
// secret every node already has), for clusters that configure no keyring.
func DeriveMasterKey(id, secret string) MasterKey {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("terrace master key v1"))
	return MasterKey{ID: id, Key: m.Sum(nil)}
}

// ActiveID is the ID of the key that seals.
func (k *Keyring) ActiveID() string { return k.ids[0] }

// IDs lists the key IDs, the active one first.
func (k *Keyring) IDs() []string { return append([]string(nil), k.ids...) }

// String names the keys without their material.
func (k *Keyring) String() string {
	return fmt.Sprintf("keyring(active=%s, keys=%s)", k.ids[0], strings.Join(k.ids, ","))
}

// GoString keeps %#v from printing key material.
func (k *Keyring) GoString() string { return k.String() }

// Seal seals plaintext with the active master key for purpose. The result
// is text: "k1:ID:BASE64(nonce|ciphertext)".
func (k *Keyring) Seal(purpose string, plaintext []byte) (string, error) {
	id := k.ids[0]
	blob, err := seal(k.keys[id], purpose+"|"+id, plaintext)
	if err != nil {
		return "", err
	}
	return "k1:" + id + ":" + blob, nil
}

// Open opens what Seal sealed, with whichever key sealed it.
func (k *Keyring) Open(purpose, sealed string) ([]byte, error) {
	id, blob, err := splitSealed(sealed)
	if err != nil {
		return nil, err
	}
	key, ok := k.keys[id]
	if !ok {
		return nil, fmt.Errorf("%w (key id %s)", ErrUnknownKey, id)
	}
	return open(key, purpose+"|"+id, blob)
}

// SealedWithActive reports whether a sealed blob uses the active key
// (false: a rewrap after rotation should re-seal it).
func (k *Keyring) SealedWithActive(sealed string) bool {
	id, _, err := splitSealed(sealed)
	return err == nil && id == k.ids[0]
}

func splitSealed(sealed string) (id, blob string, err error) {
	rest, ok := strings.CutPrefix(sealed, "k1:")
	if !ok {
		return "", "", fmt.Errorf("%w: not a keyring-sealed value", ErrFormat)
	}
	id, blob, ok = strings.Cut(rest, ":")
	if !ok {
		return "", "", fmt.Errorf("%w: not a keyring-sealed value", ErrFormat)
	}
	return id, blob, nil
}

// CustomerKEK derives the key-encryption key for an SSE-C customer key.
// The customer key is not stored; only data keys sealed with this are.
func CustomerKEK(customerKey []byte) []byte {
	m := hmac.New(sha256.New, customerKey)
	m.Write([]byte("terrace sse-c kek v1"))
	return m.Sum(nil)
}

// SealWithKEK seals plaintext with a key-encryption key (SSE-C). The
// result is text: "c1:BASE64(nonce|ciphertext)".
func SealWithKEK(kek []byte, purpose string, plaintext []byte) (string, error) {
	blob, err := seal(kek, purpose, plaintext)
	if err != nil {
		return "", err
	}
	return "c1:" + blob, nil
}

// OpenWithKEK opens what SealWithKEK sealed; a wrong key is ErrAuth.
func OpenWithKEK(kek []byte, purpose, sealed string) ([]byte, error) {
	blob, ok := strings.CutPrefix(sealed, "c1:")
	if !ok {
		return nil, fmt.Errorf("%w: not a customer-key-sealed value", ErrFormat)
	}
	return open(kek, purpose, blob)
}

func gcm(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sse: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func seal(key []byte, ad string, plaintext []byte) (string, error) {
	aead, err := gcm(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plaintext)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("sse: random: %w", err)
	}
	out := aead.Seal(nonce, nonce, plaintext, []byte(ad))
	return base64.RawStdEncoding.EncodeToString(out), nil
}

func open(key []byte, ad, blob string) ([]byte, error) {
	aead, err := gcm(key)
	if err != nil {
		return nil, err
	}
	raw, err := base64.RawStdEncoding.DecodeString(blob)
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: malformed sealed value", ErrFormat)
	}
	ns := aead.NonceSize()
	pt, err := aead.Open(nil, raw[:ns], raw[ns:], []byte(ad))
	if err != nil {
		return nil, ErrAuth
	}
	return pt, nil
}
