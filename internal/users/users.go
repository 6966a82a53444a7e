package users

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/sse"
)

// Errors.
var (
	ErrNoSuchUser  = errors.New("users: no such user")
	ErrUserExists  = errors.New("users: user already exists")
	ErrInvalidName = errors.New("users: invalid user name")
	// ErrConflict: the user changed concurrently and retries ran out.
	ErrConflict = errors.New("users: user changed concurrently; retry")
	// ErrNameInUse: the name is still what buckets, ACL grants or
	// policies refer to (a removed user's); a user created under it would
	// inherit them. Errors matching it also match ErrUserExists.
	ErrNameInUse = errors.New("users: name still in use")
)

// nameInUseError is ErrNameInUse (and ErrUserExists, so that callers
// answering "exists" need no change) with what refers to the name.
type nameInUseError struct{ msg string }

func (e nameInUseError) Error() string { return e.msg }

func (e nameInUseError) Is(target error) bool {
	return target == ErrNameInUse || target == ErrUserExists
}

// User is a user as the store reports it: no secret.
type User struct {
	Name      string    `json:"name"`
	AccessKey string    `json:"access_key"`
	Admin     bool      `json:"admin"`
	Created   time.Time `json:"created"`
}

// Credentials are a user's keys, returned only when created or rotated.
type Credentials struct {
	Name      string `json:"name"`
	AccessKey string `json:"access_key"`
	SecretKey string `json:"secret_key"`
}

// String never prints the secret.
func (c Credentials) String() string {
	return fmt.Sprintf("Credentials{Name:%s, AccessKey:%s, SecretKey:REDACTED}", c.Name, c.AccessKey)
}

// GoString keeps %#v from printing the secret.
func (c Credentials) GoString() string { return c.String() }

// record is the stored form.
type record struct {
	Name      string `json:"n"`
	AccessKey string `json:"ak"`
	Secret    string `json:"s"` // sealed with the master keyring
	Admin     bool   `json:"adm,omitempty"`
	Created   int64  `json:"c"`
}

func (r record) user() User {
	return User{Name: r.Name, AccessKey: r.AccessKey, Admin: r.Admin, Created: time.Unix(0, r.Created).UTC()}
}

// removal is the record a removed user leaves under its name.
type removal struct {
	Removed int64 `json:"r"`
}

const (
	prefixUser    = meta.PrefixIAM + "u/"
	prefixKey     = meta.PrefixIAM + "k/"
	prefixRemoved = meta.PrefixIAM + "r/"
)

func userKey(name string) []byte    { return []byte(prefixUser + name) }
func indexKey(ak string) []byte     { return []byte(prefixKey + ak) }
func removedKey(name string) []byte { return []byte(prefixRemoved + name) }

// nameRe is AWS's IAM user-name alphabet.
var nameRe = regexp.MustCompile(`^[A-Za-z0-9_+=,.@-]{1,64}$`)

// Store is the user store.
type Store struct {
	kv   meta.KV
	keys *sse.Keyring
	// reserved are names no user may take (the root account's).
	reserved map[string]bool
	now      func() time.Time
	// nameInUse, once set (SetNameInUse), says what still refers to a
	// name.
	nameInUse atomic.Pointer[NameInUseFunc]
}

// NameInUseFunc reports what still refers to a user name — buckets it
// owns, ACL grants and policies naming it — as a short description, ""
// for nothing.
type NameInUseFunc func(ctx context.Context, name string) (string, error)

// SetNameInUse installs the check Add runs before it creates a user: a
// name something still refers to is refused with ErrNameInUse, so that a
// new user never inherits a removed one's buckets and grants. The S3
// gateway installs it (the store knows nothing about buckets). Until it is
// installed, Add refuses the name of any user removed since removals were
// recorded, as it cannot tell whether that name is still in use.
func (s *Store) SetNameInUse(fn NameInUseFunc) { s.nameInUse.Store(&fn) }

// checkNameFree refuses a name something still refers to.
func (s *Store) checkNameFree(ctx context.Context, name string) error {
	if fn := s.nameInUse.Load(); fn != nil {
		what, err := (*fn)(ctx, name)
		if err != nil {
			return fmt.Errorf("users: check whether the name %q is still in use: %w", name, err)
		}
		if what != "" {
			return nameInUseError{fmt.Sprintf("users: the name %q is still in use: it %s. A new user with this name would get them: "+
				"delete those buckets, or give them another owner and take the name out of their ACLs and policies, first", name, what)}
		}
		return nil
	}
	var r removal
	_, err := meta.GetRecord(ctx, s.kv, removedKey(name), &r)
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return nameInUseError{fmt.Sprintf("users: %q is the name of a user removed on %s, and whether buckets, ACLs or policies still name it "+
		"cannot be checked until the S3 gateway has started; retry", name, time.Unix(0, r.Removed).UTC().Format(time.RFC3339))}
}

// New returns a store over kv whose secrets are sealed with keys.
// Reserved names (the root account's access key) cannot be taken.
func New(kv meta.KV, keys *sse.Keyring, reserved ...string) *Store {
	s := &Store{kv: kv, keys: keys, reserved: map[string]bool{"*": true}, now: time.Now}
	for _, r := range reserved {
		s.reserved[r] = true
	}
	return s
}

// CheckName validates a user name.
func (s *Store) CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("%w: %q: use 1-64 letters, digits or _+=,.@-", ErrInvalidName, name)
	}
	if s.reserved[name] {
		return fmt.Errorf("%w: %q is reserved", ErrInvalidName, name)
	}
	return nil
}

// newCredentials generates an access key (20 characters, AWS-like) and a
// 40-character secret.
func newCredentials() (ak, secret string, err error) {
	raw := make([]byte, 11+30)
	if _, err := rand.Read(raw); err != nil {
		return "", "", fmt.Errorf("users: random: %w", err)
	}
	ak = "TK" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(raw[:11])[:18]
	secret = base64.StdEncoding.EncodeToString(raw[11:])
	return ak, secret, nil
}

// Add creates a user with generated keys.
func (s *Store) Add(ctx context.Context, name string, admin bool) (Credentials, error) {
	ak, secret, err := newCredentials()
	if err != nil {
		return Credentials{}, err
	}
	return s.AddWithKeys(ctx, name, ak, secret, admin)
}

// AddWithKeys creates a user with the given keys (versitygw's admin API
// supplies them).
func (s *Store) AddWithKeys(ctx context.Context, name, ak, secret string, admin bool) (Credentials, error) {
	if err := s.CheckName(name); err != nil {
		return Credentials{}, err
	}
	if !nameRe.MatchString(ak) || s.reserved[ak] || secret == "" {
		return Credentials{}, fmt.Errorf("%w: access key %q", ErrInvalidName, ak)
	}
	if ok, err := s.Exists(ctx, name); err != nil {
		return Credentials{}, err
	} else if ok {
		return Credentials{}, fmt.Errorf("%w: %s", ErrUserExists, name)
	}
	if err := s.checkNameFree(ctx, name); err != nil {
		return Credentials{}, err
	}
	sealed, err := s.keys.Seal(sse.PurposeUserSecret, []byte(secret))
	if err != nil {
		return Credentials{}, err
	}
	r := record{Name: name, AccessKey: ak, Secret: sealed, Admin: admin, Created: s.now().UnixNano()}
	var t meta.Txn
	t.If(userKey(name), 0)
	t.If(indexKey(ak), 0)
	t.Put(userKey(name), meta.Encode(r))
	t.Put(indexKey(ak), meta.Encode(r))
	t.Del(removedKey(name))
	if _, err := s.kv.Commit(ctx, &t); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			if _, _, gerr := s.get(ctx, name); gerr == nil {
				return Credentials{}, fmt.Errorf("%w: %s", ErrUserExists, name)
			}
			return Credentials{}, fmt.Errorf("%w: access key %s is taken", ErrUserExists, ak)
		}
		return Credentials{}, err
	}
	return Credentials{Name: name, AccessKey: ak, SecretKey: secret}, nil
}

func (s *Store) get(ctx context.Context, name string) (record, int64, error) {
	var r record
	rev, err := meta.GetRecord(ctx, s.kv, userKey(name), &r)
	if errors.Is(err, meta.ErrNotFound) {
		return record{}, 0, fmt.Errorf("%w: %s", ErrNoSuchUser, name)
	}
	return r, rev, err
}

// Get returns a user.
func (s *Store) Get(ctx context.Context, name string) (User, error) {
	if s.reserved[name] {
		return User{}, fmt.Errorf("%w: %s", ErrNoSuchUser, name)
	}
	r, _, err := s.get(ctx, name)
	return r.user(), err
}

// Exists reports whether a user exists.
func (s *Store) Exists(ctx context.Context, name string) (bool, error) {
	_, err := s.Get(ctx, name)
	if errors.Is(err, ErrNoSuchUser) {
		return false, nil
	}
	return err == nil, err
}

// Authenticate resolves an access key to its user and secret. Unknown
// keys are ErrNoSuchUser.
func (s *Store) Authenticate(ctx context.Context, ak string) (User, string, error) {
	var r record
	_, err := meta.GetRecord(ctx, s.kv, indexKey(ak), &r)
	if errors.Is(err, meta.ErrNotFound) {
		return User{}, "", fmt.Errorf("%w: access key %s", ErrNoSuchUser, ak)
	}
	if err != nil {
		return User{}, "", err
	}
	secret, err := s.keys.Open(sse.PurposeUserSecret, r.Secret)
	if err != nil {
		return User{}, "", fmt.Errorf("users: open secret of %s: %w", r.Name, err)
	}
	return r.user(), string(secret), nil
}

// List returns every user by name.
func (s *Store) List(ctx context.Context) ([]User, error) {
	start := []byte(prefixUser)
	end := meta.PrefixEnd(start)
	var out []User
	for {
		items, err := s.kv.Scan(ctx, start, end, 512)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			var r record
			if err := meta.Decode(it.Value, &r); err != nil {
				return nil, err
			}
			out = append(out, r.user())
		}
		if len(items) < 512 {
			break
		}
		start = append(append([]byte(nil), items[len(items)-1].Key...), 0)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// errUnchanged lets an update function skip the write.
var errUnchanged = errors.New("unchanged")

// update applies fn to a user's record with compare-and-swap, keeping the
// index in step (fn may change the access key).
func (s *Store) update(ctx context.Context, name string, fn func(*record) error) (record, error) {
	for attempt := 0; attempt < 16; attempt++ {
		r, rev, err := s.get(ctx, name)
		if err != nil {
			return record{}, err
		}
		old := r.AccessKey
		if err := fn(&r); errors.Is(err, errUnchanged) {
			return r, nil
		} else if err != nil {
			return record{}, err
		}
		var t meta.Txn
		t.If(userKey(name), rev)
		t.Put(userKey(name), meta.Encode(r))
		if r.AccessKey != old {
			t.If(indexKey(r.AccessKey), 0)
			t.Del(indexKey(old))
		}
		t.Put(indexKey(r.AccessKey), meta.Encode(r))
		if _, err := s.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else if err != nil {
			return record{}, err
		}
		return r, nil
	}
	return record{}, fmt.Errorf("%w: %s", ErrConflict, name)
}

// RotateKeys replaces a user's access key and secret; the old keys stop
// working at once.
func (s *Store) RotateKeys(ctx context.Context, name string) (Credentials, error) {
	var secret string
	r, err := s.update(ctx, name, func(r *record) error {
		ak, sec, err := newCredentials()
		if err != nil {
			return err
		}
		sealed, err := s.keys.Seal(sse.PurposeUserSecret, []byte(sec))
		if err != nil {
			return err
		}
		r.AccessKey, r.Secret, secret = ak, sealed, sec
		return nil
	})
	if err != nil {
		return Credentials{}, err
	}
	return Credentials{Name: r.Name, AccessKey: r.AccessKey, SecretKey: secret}, nil
}

// Update changes a user's secret (if secret is not nil) and admin flag
// (if admin is not nil).
func (s *Store) Update(ctx context.Context, name string, secret *string, admin *bool) error {
	_, err := s.update(ctx, name, func(r *record) error {
		if secret != nil {
			if *secret == "" {
				return fmt.Errorf("%w: empty secret", ErrInvalidName)
			}
			sealed, err := s.keys.Seal(sse.PurposeUserSecret, []byte(*secret))
			if err != nil {
				return err
			}
			r.Secret = sealed
		}
		if admin != nil {
			r.Admin = *admin
		}
		return nil
	})
	return err
}

// Remove deletes a user; its keys stop working at once. Buckets it owns
// keep its name as owner, and ACL grants and policies naming it keep it:
// the name stays in use, and Add refuses it (ErrNameInUse) until they are
// deleted, re-owned or changed. The removal is recorded under the name.
func (s *Store) Remove(ctx context.Context, name string) error {
	for attempt := 0; attempt < 16; attempt++ {
		r, rev, err := s.get(ctx, name)
		if err != nil {
			return err
		}
		var t meta.Txn
		t.If(userKey(name), rev)
		t.Del(userKey(name))
		t.Del(indexKey(r.AccessKey))
		t.Put(removedKey(name), meta.Encode(removal{Removed: s.now().UnixNano()}))
		if _, err := s.kv.Commit(ctx, &t); errors.Is(err, meta.ErrConflict) {
			continue
		} else {
			return err
		}
	}
	return fmt.Errorf("%w: %s", ErrConflict, name)
}

// Rewrap re-seals every secret not sealed with the active master key
// (after a rotation) and returns how many it re-sealed.
func (s *Store) Rewrap(ctx context.Context) (int, error) {
	all, err := s.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, u := range all {
		changed := false
		_, err := s.update(ctx, u.Name, func(r *record) error {
			changed = false
			if s.keys.SealedWithActive(r.Secret) {
				return errUnchanged
			}
			secret, err := s.keys.Open(sse.PurposeUserSecret, r.Secret)
			if err != nil {
				return err
			}
			if r.Secret, err = s.keys.Seal(sse.PurposeUserSecret, secret); err != nil {
				return err
			}
			changed = true
			return nil
		})
		if errors.Is(err, ErrNoSuchUser) {
			continue // removed meanwhile
		}
		if err != nil {
			return n, err
		}
		if changed {
			n++
		}
	}
	return n, nil
}
