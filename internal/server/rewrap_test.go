package server

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/sse"
	"github.com/terrace-storage/terrace/internal/users"
)

func TestRewrapAfterRotation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	oldKey, _ := sse.NewMasterKey("old")
	t.Setenv("TERRACE_MASTER_KEY", sse.FormatKeyLine(oldKey))
	cfg := Config{DataDir: dir, Devices: []string{"ssd:" + filepath.Join(dir, "ssd0") + ":1GiB"}, DefaultVector: "any=1", ProbeBytes: 64 << 10}
	n, err := Open(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if err := n.Layer.CreateBucket(ctx, "bkt", "terrace", n.Layer.Options().DefaultVector); err != nil {
		t.Fatal(err)
	}
	dk, _ := sse.NewDataKey()
	sealed, _ := n.Keys.Seal(sse.PurposeObjectKey, dk)
	for _, k := range []string{"enc1", "enc2"} {
		rec := sse.ObjectRecord{Mode: sse.ModeS3, Key: sealed}
		if _, err := n.Layer.Put(ctx, "bkt", k, bytes.NewReader([]byte("x")), object.PutOptions{Size: 1, Headers: map[string]string{sse.ObjectHeader: rec.Encode()}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Layer.Put(ctx, "bkt", "plain", bytes.NewReader([]byte("x")), object.PutOptions{Size: 1}); err != nil {
		t.Fatal(err)
	}
	creds, err := n.Users.Add(ctx, "alice", false)
	if err != nil {
		t.Fatal(err)
	}
	// Rotate: the new key first, the old one kept.
	newKey, _ := sse.NewMasterKey("new")
	n.Keys, _ = sse.NewKeyring(newKey, oldKey)
	n.Users = users.New(n.KV, n.Keys, "terrace")
	rep, err := n.Rewrap(ctx)
	if err != nil || rep.Users != 1 || rep.Objects != 2 || rep.Scanned != 3 || rep.ActiveKey != "new" {
		t.Fatalf("rewrap: %v %+v", err, rep)
	}
	if rep, err := n.Rewrap(ctx); err != nil || rep.Users != 0 || rep.Objects != 0 {
		t.Fatalf("second rewrap: %v %+v", err, rep)
	}
	// The old key is no longer needed.
	onlyNew, _ := sse.NewKeyring(newKey)
	for _, k := range []string{"enc1", "enc2"} {
		info, err := n.Layer.Head(ctx, "bkt", k)
		if err != nil {
			t.Fatal(err)
		}
		rec, err := sse.ParseObjectRecord(info.Headers[sse.ObjectHeader])
		if err != nil {
			t.Fatal(err)
		}
		got, err := onlyNew.Open(sse.PurposeObjectKey, rec.Key)
		if err != nil || !bytes.Equal(got, dk) {
			t.Fatalf("%s after rewrap: %v", k, err)
		}
	}
	if _, sec, err := users.New(n.KV, onlyNew, "terrace").Authenticate(ctx, creds.AccessKey); err != nil || sec != creds.SecretKey {
		t.Fatalf("user after rewrap: %v", err)
	}
}
