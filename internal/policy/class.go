package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// ObjectStore is the part of the object layer class methods use: whole-
// object reads and conditional writes.
type ObjectStore interface {
	Get(ctx context.Context, bucket, key string, off, n int64) (object.ObjectInfo, io.ReadCloser, error)
	Put(ctx context.Context, bucket, key string, body io.Reader, opts object.PutOptions) (object.ObjectInfo, error)
}

var _ ObjectStore = (*object.Layer)(nil)

// ExecRequest invokes CLASS.METHOD on bucket/key with an argument.
type ExecRequest struct {
	Bucket string `json:"bucket"`
	Key    string `json:"key"`
	Class  string `json:"class"`
	Method string `json:"method"`
	Arg    string `json:"arg,omitempty"`
	// DryRun runs the method and reports what it would write, without
	// writing (`terrace policy test`).
	DryRun bool `json:"dry_run,omitempty"`
}

// ExecResult is a method's outcome.
type ExecResult struct {
	Class    string `json:"class"`
	Method   string `json:"method"`
	Version  int64  `json:"version"`
	Result   any    `json:"result"`
	Text     string `json:"text"` // the result as `object exec` prints it
	Wrote    bool   `json:"wrote"`
	Size     int64  `json:"size"`
	ETag     string `json:"etag,omitempty"`
	Attempts int    `json:"attempts"`
	Node     string `json:"node,omitempty"`
	Log      string `json:"log,omitempty"`
}

// Errors of object exec.
var (
	ErrNoSuchClass  = errors.New("policy: no such class")
	ErrNoSuchMethod = errors.New("policy: no such method")
	ErrContention   = errors.New("policy: object changed by concurrent writers on every attempt")
	ErrObjectSize   = errors.New("policy: object too large for a class method")
)

// Exec retry bounds. Each attempt re-reads the object and re-runs the
// method; backoff grows from 1 ms to 64 ms with full jitter, so 64
// attempts ride out a few dozen concurrent writers on one object.
const (
	maxExecAttempts = 64
	execBackoffBase = time.Millisecond
	execBackoffMax  = 64 * time.Millisecond
)

// errChanged refuses a conditional write: the object is not what the
// method read.
var errChanged = errors.New("policy: object changed since it was read")

// Exec runs a class method as an atomic read-modify-write of one object:
// read it (absent is fine), run the method on a copy, and if the method
// wrote, put the new contents on condition that the object is still what
// was read (its ETag, or still absent); on a lost race, re-read and run
// again. The ETag is the content's MD5, so the condition is on content:
// if another writer left the same bytes, the method's result is still
// correct for them.
func (m *Manager) Exec(ctx context.Context, store ObjectStore, req ExecRequest) (ExecResult, error) {
	sl := m.named(req.Class)
	if sl == nil || sl.hook != HookClass {
		return ExecResult{}, fmt.Errorf("%w: %q (put a class policy with that name)", ErrNoSuchClass, req.Class)
	}
	v := sl.cur.Load()
	if v == nil {
		return ExecResult{}, fmt.Errorf("%w: %q", ErrNoSuchClass, req.Class)
	}
	if v.disabled.Load() {
		last := ""
		if e := v.lastErr.Load(); e != nil {
			last = *e
		}
		return ExecResult{}, fmt.Errorf("policy: class %s version %d is disabled on this node after repeated failures (put a fixed version); last error: %s", v.Name, v.Version, last)
	}
	methods := classMethods(v.functions)
	found := false
	for _, f := range methods {
		found = found || f == req.Method
	}
	if !found {
		return ExecResult{}, fmt.Errorf("%w: class %s has no method %q (methods: %s)", ErrNoSuchMethod, req.Class, req.Method, strings.Join(methods, ", "))
	}
	for attempt := 1; attempt <= maxExecAttempts; attempt++ {
		res, err := m.execOnce(ctx, sl, v, store, req)
		res.Attempts = attempt
		if errors.Is(err, errChanged) || errors.Is(err, object.ErrConditionalConflict) {
			backoff := min(execBackoffBase<<min(attempt-1, 6), execBackoffMax)
			select {
			case <-time.After(time.Duration(rand.Int64N(int64(backoff)) + 1)):
			case <-ctx.Done():
				return res, ctx.Err()
			}
			continue
		}
		return res, err
	}
	return ExecResult{}, fmt.Errorf("%w: %s/%s after %d attempts", ErrContention, req.Bucket, req.Key, maxExecAttempts)
}

// objectState is the object a method works on.
type objectState struct {
	data    string
	exists  bool
	written bool
}

func (m *Manager) execOnce(ctx context.Context, sl *slot, v *Version, store ObjectStore, req ExecRequest) (ExecResult, error) {
	res := ExecResult{Class: v.Name, Method: req.Method, Version: v.Version}
	info, data, exists, err := readObject(ctx, store, req.Bucket, req.Key)
	if err != nil {
		return res, err
	}
	st := &objectState{data: string(data), exists: exists}
	out, log, err := runMethod(ctx, v, st, req, info)
	res.Log = log
	if err != nil {
		// Budget and deadline overruns are the class misbehaving; an
		// error() the method raised is its answer to this input.
		if k := sandbox.KindOf(err); k != sandbox.KindRuntime && k != sandbox.KindCanceled {
			m.failed(sl, v, err)
		}
		return res, err
	}
	m.succeeded(sl, v)
	res.Result, res.Text = out, resultText(out)
	res.Size, res.ETag = info.Size, info.ETag
	if !st.written || req.DryRun {
		res.Size = int64(len(st.data))
		return res, nil
	}
	pre := func(etag string, ex bool) error {
		if ex != exists || (exists && etag != info.ETag) {
			return errChanged
		}
		return nil
	}
	opts := object.PutOptions{Size: int64(len(st.data)), Precondition: pre}
	if exists {
		opts.Vector, opts.Class, opts.Headers, opts.UserMeta, opts.Tags = info.Vector, info.Class, info.Headers, info.UserMeta, info.Tags
	}
	oi, err := store.Put(ctx, req.Bucket, req.Key, strings.NewReader(st.data), opts)
	if err != nil {
		return res, err
	}
	res.Wrote, res.Size, res.ETag = true, oi.Size, oi.ETag
	return res, nil
}

// readObject reads a whole object; a missing key is an empty, absent one.
func readObject(ctx context.Context, store ObjectStore, bucket, key string) (object.ObjectInfo, []byte, bool, error) {
	info, rc, err := store.Get(ctx, bucket, key, 0, -1)
	if errors.Is(err, object.ErrNoSuchKey) {
		return object.ObjectInfo{}, nil, false, nil
	}
	if errors.Is(err, object.ErrInvalidRange) && info.Size == 0 {
		return info, nil, true, nil
	}
	if err != nil {
		return info, nil, false, err
	}
	defer rc.Close()
	if info.Size > MaxClassObjectBytes {
		return info, nil, false, fmt.Errorf("%w: %s/%s is %d bytes, limit %d", ErrObjectSize, bucket, key, info.Size, MaxClassObjectBytes)
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, io.LimitReader(rc, MaxClassObjectBytes+1)); err != nil {
		return info, nil, false, err
	}
	return info, buf.Bytes(), true, nil
}

// runMethod calls METHOD(obj, arg). obj has fields bucket, key, exists,
// size, etag and methods read(), write(s), append(s).
func runMethod(ctx context.Context, v *Version, st *objectState, req ExecRequest, info object.ObjectInfo) (any, string, error) {
	var out any
	var log string
	objErr := func(format string, args ...any) error { return fmt.Errorf(format, args...) }
	obj := map[string]any{
		"bucket": req.Bucket, "key": req.Key, "exists": st.exists, "size": int64(len(st.data)), "etag": info.ETag,
		"read": sandbox.Method(func([]any) ([]any, error) { return []any{st.data}, nil }),
		"write": sandbox.Method(func(a []any) ([]any, error) {
			s, err := stringArg(a, "write")
			if err != nil {
				return nil, err
			}
			if len(s) > MaxClassObjectBytes {
				return nil, objErr("write: %d bytes exceed the class object limit of %d", len(s), MaxClassObjectBytes)
			}
			st.data, st.written = s, true
			return nil, nil
		}),
		"append": sandbox.Method(func(a []any) ([]any, error) {
			s, err := stringArg(a, "append")
			if err != nil {
				return nil, err
			}
			if len(st.data)+len(s) > MaxClassObjectBytes {
				return nil, objErr("append: object would be %d bytes, over the class object limit of %d", len(st.data)+len(s), MaxClassObjectBytes)
			}
			st.data, st.written = st.data+s, true
			return nil, nil
		}),
	}
	var arg any
	if req.Arg != "" {
		arg = req.Arg
	}
	err := v.prog.Run(ctx, sandbox.RunOptions{Seed: 1}, func(s *sandbox.Session) error {
		res, err := s.Call(req.Method, obj, arg)
		log = s.Log()
		if err != nil {
			return err
		}
		if len(res) > 0 {
			out = res[0]
		}
		return nil
	})
	if err == nil {
		err = checkResultSize(v, req.Method, out)
	}
	if err != nil {
		out = nil
	}
	return out, log, err
}

// checkResultSize bounds the JSON text of a method's result (what
// resultText and the API print) by the class's string limit, measured
// before anything is built: a table may hold one large string many
// times, and its text would be that many copies.
func checkResultSize(v *Version, method string, out any) error {
	switch out.(type) {
	case []any, map[string]any:
	default:
		return nil // a string, number or boolean is already bounded
	}
	limit := v.prog.Limits().MaxStringBytes
	if _, err := sandbox.JSONSize(out, limit); err != nil {
		msg := fmt.Sprintf("%s returned a table whose JSON text is over the class string limit of %d bytes (return less, or write it to the object)", method, limit)
		if !errors.Is(err, sandbox.ErrJSONTooLarge) {
			msg = fmt.Sprintf("%s returned a table that cannot be printed: %v", method, err)
		}
		return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: msg}
	}
	return nil
}

func stringArg(a []any, fn string) (string, error) {
	if len(a) != 1 {
		return "", fmt.Errorf("%s takes one string", fn)
	}
	switch x := a[0].(type) {
	case string:
		return x, nil
	case float64:
		return sandboxNumber(x), nil
	}
	return "", fmt.Errorf("%s: want a string, got %s", fn, describe(a[0]))
}

// sandboxNumber prints a number as Lua's tostring does.
func sandboxNumber(f float64) string {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return fmt.Sprintf("%d", int64(f))
	}
	return fmt.Sprintf("%.14g", f)
}

// resultText prints a method's result for `object exec`: strings as they
// are, numbers as Lua prints them, tables as JSON, nil as nothing. The
// result comes from runMethod, which bounded its JSON text.
func resultText(x any) string {
	switch v := x.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return sandboxNumber(v)
	case bool:
		return fmt.Sprint(v)
	}
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

// objectInfoEmpty describes the absent object validation runs methods on.
var objectInfoEmpty = object.ObjectInfo{}
