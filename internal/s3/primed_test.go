package s3

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// onlyReader hides any WriteTo of the reader it wraps.
type onlyReader struct{ io.Reader }

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

// TestPrimedBody: the first byte is read before the status goes out and
// still reaches the client, whether the body is read with Read or
// streamed with WriteTo, through a reader with or without WriteTo.
func TestPrimedBody(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10_000)
	for name, mk := range map[string]func() io.ReadCloser{
		"writerto":   func() io.ReadCloser { return nopCloser{bytes.NewReader(data)} },
		"reader":     func() io.ReadCloser { return nopCloser{onlyReader{bytes.NewReader(data)}} },
		"one-byte":   func() io.ReadCloser { return nopCloser{iotest.OneByteReader(bytes.NewReader(data))} },
		"data+error": func() io.ReadCloser { return nopCloser{iotest.DataErrReader(bytes.NewReader(data))} },
	} {
		b, err := primeBody(mk())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var out bytes.Buffer
		if n, err := b.WriteTo(&out); err != nil || n != int64(len(data)) || !bytes.Equal(out.Bytes(), data) {
			t.Fatalf("%s: WriteTo wrote %d bytes, err %v", name, n, err)
		}
		b, _ = primeBody(mk())
		got, err := io.ReadAll(onlyReader{b})
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s: Read returned %d bytes, err %v", name, len(got), err)
		}
	}
	// An empty body is not an error and yields nothing.
	b, err := primeBody(nopCloser{bytes.NewReader(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.WriteTo(io.Discard); n != 0 || err != nil {
		t.Fatalf("empty body: %d bytes, %v", n, err)
	}
	// A body whose first read fails is refused before the status goes out.
	boom := errors.New("every replica failed")
	if _, err := primeBody(nopCloser{iotest.ErrReader(boom)}); !errors.Is(err, boom) {
		t.Fatalf("first-read failure: %v", err)
	}
	// A failure later in the stream reaches the writer's caller.
	b, _ = primeBody(nopCloser{io.MultiReader(bytes.NewReader(data[:100]), iotest.ErrReader(boom))})
	if n, err := b.WriteTo(io.Discard); !errors.Is(err, boom) || n != 100 {
		t.Fatalf("mid-stream failure: %d bytes, %v", n, err)
	}
}
