package object

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

var errExists = errors.New("test: object exists")

// ifNoneMatchStar refuses when the object exists; on its first call it lets
// race run first, as a concurrent writer that slips in between the check
// and the commit.
func ifNoneMatchStar(race func()) Precondition {
	calls := 0
	return func(_ string, exists bool) error {
		calls++
		if calls == 1 && race != nil {
			race()
		}
		if exists {
			return errExists
		}
		return nil
	}
}

func TestConditionalPutIsAtomicWithCommit(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	mine, theirs := payload(1, 20<<10), payload(2, 20<<10)
	put := func(key string, data []byte, p Precondition) error {
		_, err := e.l.Put(ctx, "bkt", key, bytes.NewReader(data), PutOptions{Size: int64(len(data)), Precondition: p})
		return err
	}
	read := func(key string) []byte {
		t.Helper()
		_, rc, err := e.l.Get(ctx, "bkt", key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return b
	}

	// No race: create-only succeeds once, then is refused before any data
	// is written.
	if err := put("a", mine, ifNoneMatchStar(nil)); err != nil {
		t.Fatal(err)
	}
	if err := put("a", theirs, ifNoneMatchStar(nil)); !errors.Is(err, errExists) {
		t.Fatalf("create-only over an existing object: %v", err)
	}

	// A writer creates the key between the check and the commit: the
	// conditional write must not overwrite it.
	err := put("b", mine, ifNoneMatchStar(func() {
		if err := put("b", theirs, nil); err != nil {
			t.Fatal(err)
		}
	}))
	if !errors.Is(err, errExists) {
		t.Fatalf("create-only that lost a race: %v, want the precondition's refusal", err)
	}
	if !bytes.Equal(read("b"), theirs) {
		t.Fatal("the racing writer's object was overwritten")
	}

	// If-Match whose object is rewritten with the same ETag in between:
	// the condition still holds but was never checked against that
	// version, so the write reports a conflict rather than committing.
	info, _ := e.l.Head(ctx, "bkt", "a")
	calls := 0
	ifMatch := func(etag string, exists bool) error {
		calls++
		if calls == 1 {
			if err := put("a", mine, nil); err != nil { // same bytes, same ETag
				t.Fatal(err)
			}
		}
		if !exists || etag != info.ETag {
			return errExists
		}
		return nil
	}
	if err := put("a", theirs, ifMatch); !errors.Is(err, ErrConditionalConflict) {
		t.Fatalf("if-match that raced with an equal rewrite: %v, want ErrConditionalConflict", err)
	}
	if !bytes.Equal(read("a"), mine) {
		t.Fatal("a conflicting conditional write changed the object")
	}
}

func TestConditionalCompleteUpload(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if err := e.l.CreateBucket(ctx, "bkt", "", model.Vector{}); err != nil {
		t.Fatal(err)
	}
	data := payload(5, 10<<10)
	if _, err := e.l.Put(ctx, "bkt", "k", bytes.NewReader(data), PutOptions{Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	id, err := e.l.CreateUpload(ctx, "bkt", "k", PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p1, err := e.l.UploadPart(ctx, "bkt", id, 1, bytes.NewReader(data), int64(len(data)), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, p1.ETag}}, ifNoneMatchStar(nil)); !errors.Is(err, errExists) {
		t.Fatalf("create-only complete over an existing object: %v", err)
	}
	// The upload survives a refused complete and can still be completed.
	if _, err := e.l.CompleteUpload(ctx, "bkt", id, []CompletePart{{1, p1.ETag}}, nil); err != nil {
		t.Fatal(err)
	}
}
