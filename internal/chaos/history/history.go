package history

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
)

// Kind is an operation's type.
type Kind string

// Operation kinds. A multipart upload is recorded as one write whose
// interval is that of CompleteMultipartUpload, where the object appears.
const (
	Put       Kind = "put"
	Multipart Kind = "multipart"
	Get       Kind = "get"
	Delete    Kind = "delete"
	List      Kind = "list"
)

// IsWrite reports whether k writes a value.
func (k Kind) IsWrite() bool { return k == Put || k == Multipart }

// Outcome is how an operation ended.
type Outcome string

const (
	// OK: the server acknowledged it.
	OK Outcome = "ok"
	// Fail: it certainly had no effect (the connection was refused, or the
	// server answered with an error that promises no effect).
	Fail Outcome = "fail"
	// Unknown: it may or may not have taken effect (a timeout, a broken
	// connection, a server error after the request was sent).
	Unknown Outcome = "unknown"
)

// Op is one client operation.
type Op struct {
	ID     int64  `json:"id"`
	Client int    `json:"client"`
	Node   string `json:"node"` // the node whose S3 endpoint was used
	Kind   Kind   `json:"op"`
	Key    string `json:"key,omitempty"`
	// Value ID of a write (unique per write; the content is a function of
	// the run's seed and this ID).
	Write int64 `json:"write,omitempty"`
	// Size and Digest (SHA-256, hex) of the body written or read; ETag as
	// the server reported it (read) or as S3 defines it (write).
	Size   int64  `json:"size,omitempty"`
	Digest string `json:"digest,omitempty"`
	ETag   string `json:"etag,omitempty"`
	// Found is false for a read answered NoSuchKey.
	Found bool `json:"found,omitempty"`
	// Prefix and Entries of a list (all pages of one listing).
	Prefix  string  `json:"prefix,omitempty"`
	Entries []Entry `json:"entries,omitempty"`
	// Call and Return are nanoseconds since the start of the run, on one
	// monotonic clock shared by every client.
	Call    int64   `json:"call"`
	Return  int64   `json:"ret"`
	Outcome Outcome `json:"outcome"`
	Err     string  `json:"err,omitempty"`
	// Final marks the verification reads after the faults were healed.
	Final bool `json:"final,omitempty"`
}

// Entry is one object in a listing.
type Entry struct {
	Key  string `json:"key"`
	Size int64  `json:"size"`
	ETag string `json:"etag"`
}

func (o Op) String() string {
	s := fmt.Sprintf("#%d c%d %s %s %s [%d,%d] %s", o.ID, o.Client, o.Node, o.Kind, o.Key, o.Call, o.Return, o.Outcome)
	switch {
	case o.Kind.IsWrite():
		s += fmt.Sprintf(" write=%d size=%d digest=%.12s", o.Write, o.Size, o.Digest)
	case o.Kind == Get && o.Outcome == OK && o.Found:
		s += fmt.Sprintf(" -> size=%d digest=%.12s", o.Size, o.Digest)
	case o.Kind == Get && o.Outcome == OK:
		s += " -> not found"
	case o.Kind == List && o.Outcome == OK:
		s += fmt.Sprintf(" prefix=%q -> %d entries", o.Prefix, len(o.Entries))
	}
	if o.Err != "" {
		s += " err=" + o.Err
	}
	return s
}

// Writer appends operations to a JSON-lines file; safe for concurrent use.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	enc *json.Encoder
	n   int64
	err error
}

// Create opens path for writing (truncating it).
func Create(path string) (*Writer, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	return &Writer{f: f, w: w, enc: json.NewEncoder(w)}, nil
}

// Add records one operation.
func (w *Writer) Add(op Op) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = w.enc.Encode(op)
		w.n++
	}
}

// Len is the number of operations recorded.
func (w *Writer) Len() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Close flushes and closes the file, returning the first error.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.w.Flush(); err != nil && w.err == nil {
		w.err = err
	}
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// Read parses a JSON-lines history.
func Read(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return nil, fmt.Errorf("history: line %d: %w", line, err)
		}
		ops = append(ops, op)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("history: line %d: %w", line+1, err)
	}
	return ops, nil
}

// ReadFile reads a history file.
func ReadFile(path string) ([]Op, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	return Read(f)
}
