package users

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/sse"
)

func openStore(t *testing.T, keys *sse.Keyring) (*Store, meta.KV) {
	t.Helper()
	kv, err := meta.OpenPebble(filepath.Join(t.TempDir(), "meta"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return New(kv, keys, "root"), kv
}

func keyring(t *testing.T, ids ...string) (*sse.Keyring, []sse.MasterKey) {
	t.Helper()
	var mks []sse.MasterKey
	for _, id := range ids {
		mk, err := sse.NewMasterKey(id)
		if err != nil {
			t.Fatal(err)
		}
		mks = append(mks, mk)
	}
	k, err := sse.NewKeyring(mks...)
	if err != nil {
		t.Fatal(err)
	}
	return k, mks
}

func TestUserLifecycle(t *testing.T) {
	ctx := context.Background()
	k, _ := keyring(t, "a")
	s, kv := openStore(t, k)
	alice, err := s.Add(ctx, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(alice.AccessKey) != 20 || len(alice.SecretKey) != 40 || !strings.HasPrefix(alice.AccessKey, "TK") {
		t.Fatalf("credentials %s (secret %d chars)", alice, len(alice.SecretKey))
	}
	if strings.Contains(fmt.Sprintf("%v %+v %#v", alice, alice, alice), alice.SecretKey) {
		t.Fatal("credentials print their secret")
	}
	if _, err := s.Add(ctx, "alice", true); !errors.Is(err, ErrUserExists) {
		t.Fatalf("second alice: %v", err)
	}
	for _, bad := range []string{"", "root", "*", "has space", strings.Repeat("x", 65), "slash/name"} {
		if _, err := s.Add(ctx, bad, false); !errors.Is(err, ErrInvalidName) {
			t.Fatalf("name %q: %v", bad, err)
		}
	}
	bob, err := s.Add(ctx, "bob", true)
	if err != nil {
		t.Fatal(err)
	}
	u, secret, err := s.Authenticate(ctx, alice.AccessKey)
	if err != nil || u.Name != "alice" || u.Admin || secret != alice.SecretKey {
		t.Fatalf("authenticate alice: %v %+v", err, u)
	}
	if u, _, err := s.Authenticate(ctx, bob.AccessKey); err != nil || !u.Admin {
		t.Fatalf("authenticate bob: %v %+v", err, u)
	}
	if _, _, err := s.Authenticate(ctx, "TKNOPE"); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("unknown key: %v", err)
	}
	// The secret is stored sealed only.
	items, _ := kv.Scan(ctx, []byte(meta.PrefixIAM), meta.PrefixEnd([]byte(meta.PrefixIAM)), 0)
	if len(items) != 4 {
		t.Fatalf("%d IAM records, want 4 (2 users + 2 index)", len(items))
	}
	for _, it := range items {
		if strings.Contains(string(it.Value), alice.SecretKey) || strings.Contains(string(it.Value), bob.SecretKey) {
			t.Fatalf("secret stored in the clear under %s", it.Key)
		}
	}
	// Rotation: the old key stops working, the identity stays.
	rot, err := s.RotateKeys(ctx, "alice")
	if err != nil || rot.AccessKey == alice.AccessKey || rot.SecretKey == alice.SecretKey {
		t.Fatalf("rotate: %v %s", err, rot)
	}
	if _, _, err := s.Authenticate(ctx, alice.AccessKey); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("old key after rotation: %v", err)
	}
	if u, sec, err := s.Authenticate(ctx, rot.AccessKey); err != nil || u.Name != "alice" || sec != rot.SecretKey {
		t.Fatalf("new key: %v", err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 2 || list[0].Name != "alice" || list[0].AccessKey != rot.AccessKey || list[1].Name != "bob" {
		t.Fatalf("list: %v %+v", err, list)
	}
	newSecret, no := "chosen-secret", false
	if err := s.Update(ctx, "bob", &newSecret, &no); err != nil {
		t.Fatal(err)
	}
	if u, sec, err := s.Authenticate(ctx, bob.AccessKey); err != nil || u.Admin || sec != newSecret {
		t.Fatalf("after update: %v %+v", err, u)
	}
	if err := s.Remove(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Authenticate(ctx, rot.AccessKey); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("removed user's key: %v", err)
	}
	if err := s.Remove(ctx, "alice"); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("remove twice: %v", err)
	}
	if ok, err := s.Exists(ctx, "bob"); !ok || err != nil {
		t.Fatalf("bob exists: %v %v", ok, err)
	}
}

func TestConcurrentAddOneWins(t *testing.T) {
	ctx := context.Background()
	k, _ := keyring(t, "a")
	s, _ := openStore(t, k)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, exists := 0, 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Add(ctx, "carol", false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, ErrUserExists):
				exists++
			default:
				t.Errorf("add: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || exists != 7 {
		t.Fatalf("%d adds won, %d saw ErrUserExists", wins, exists)
	}
}

func TestRewrapAfterKeyRotation(t *testing.T) {
	ctx := context.Background()
	old, mks := keyring(t, "old")
	s, kv := openStore(t, old)
	c, err := s.Add(ctx, "dave", false)
	if err != nil {
		t.Fatal(err)
	}
	nk, _ := sse.NewMasterKey("new")
	rotated, _ := sse.NewKeyring(nk, mks[0])
	s2 := New(kv, rotated, "root")
	if n, err := s2.Rewrap(ctx); err != nil || n != 1 {
		t.Fatalf("rewrap: %d %v", n, err)
	}
	if n, err := s2.Rewrap(ctx); err != nil || n != 0 {
		t.Fatalf("second rewrap: %d %v", n, err)
	}
	onlyNew, _ := sse.NewKeyring(nk)
	s3 := New(kv, onlyNew, "root")
	if _, sec, err := s3.Authenticate(ctx, c.AccessKey); err != nil || sec != c.SecretKey {
		t.Fatalf("after rewrap the old key is not needed: %v", err)
	}
}

// TestRemovedNameNotReused: a user cannot be created under a name that
// something still refers to (the name is the identity buckets, ACL grants
// and policies name), so a new user never inherits a removed one's
// buckets and grants. Without a check installed (the S3 gateway not
// started yet) a removed user's name is refused outright.
func TestRemovedNameNotReused(t *testing.T) {
	ctx := context.Background()
	k, _ := keyring(t, "a")
	s, _ := openStore(t, k)
	if _, err := s.Add(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Add(ctx, "alice", false)
	if !errors.Is(err, ErrNameInUse) || !errors.Is(err, ErrUserExists) || !strings.Contains(err.Error(), "removed") {
		t.Fatalf("re-adding a removed user's name with no check installed: %v", err)
	}
	if _, err := s.Add(ctx, "bob", false); err != nil {
		t.Fatalf("a name never used needs no check: %v", err)
	}

	refs := map[string]string{"alice": "owns bucket photos", "carol": "is named in the policy of bucket shared"}
	var checkErr error
	s.SetNameInUse(func(_ context.Context, name string) (string, error) { return refs[name], checkErr })
	for _, name := range []string{"alice", "carol"} { // carol: removed before removals were recorded
		_, err := s.Add(ctx, name, false)
		if !errors.Is(err, ErrNameInUse) || !strings.Contains(err.Error(), refs[name]) || !strings.Contains(err.Error(), name) {
			t.Fatalf("adding %s, still referred to: %v", name, err)
		}
	}
	checkErr = errors.New("store down")
	if _, err := s.Add(ctx, "dave", false); !errors.Is(err, checkErr) {
		t.Fatalf("a failed check must fail the add: %v", err)
	}
	checkErr = nil

	delete(refs, "alice") // the buckets were deleted or re-owned
	if _, err := s.Add(ctx, "alice", false); err != nil {
		t.Fatalf("re-adding a name nothing refers to any more: %v", err)
	}
	if err := s.Remove(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, "alice", false); err != nil {
		t.Fatalf("re-adding alice again: %v", err)
	}
}
