package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Op is one kind of S3 request.
type Op string

// The operations a workload issues.
const (
	OpPut    Op = "put"
	OpGet    Op = "get"
	OpHead   Op = "head"
	OpList   Op = "list"
	OpDelete Op = "delete"
)

// AllOps lists the operations in report order.
var AllOps = []Op{OpPut, OpGet, OpHead, OpList, OpDelete}

func parseOp(s string) (Op, error) {
	op := Op(strings.ToLower(strings.TrimSpace(s)))
	if slices.Contains(AllOps, op) {
		return op, nil
	}
	return "", fmt.Errorf("bench: unknown operation %q (want put, get, head, list or delete)", s)
}

// Mix is the weight of each operation in a workload. A single-operation
// workload ("put") is a Mix with one entry.
type Mix map[Op]int

// ParseWorkload parses a workload name: put, get, head, list, delete, or mixed
// (the default mix get=60,put=25,head=5,list=5,delete=5), or an explicit mix
// such as "get=70,put=30".
func ParseWorkload(s string) (Mix, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	switch t {
	case "":
		return nil, errors.New("bench: empty workload")
	case "mixed":
		return Mix{OpGet: 60, OpPut: 25, OpHead: 5, OpList: 5, OpDelete: 5}, nil
	}
	if !strings.Contains(t, "=") {
		op, err := parseOp(t)
		if err != nil {
			return nil, fmt.Errorf("bench: workload %q: want put, get, head, list, delete, mixed or a mix like get=70,put=30", s)
		}
		return Mix{op: 1}, nil
	}
	m := Mix{}
	for _, part := range strings.Split(t, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("bench: workload %q: %q is not OP=WEIGHT", s, part)
		}
		op, err := parseOp(name)
		if err != nil {
			return nil, fmt.Errorf("bench: workload %q: %w", s, err)
		}
		if _, dup := m[op]; dup {
			return nil, fmt.Errorf("bench: workload %q: %s given twice", s, op)
		}
		n, err := strconv.Atoi(strings.TrimSpace(w))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bench: workload %q: weight %q must be a non-negative integer", s, w)
		}
		if n > 0 {
			m[op] = n
		}
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("bench: workload %q: all weights are zero", s)
	}
	return m, nil
}

// String prints the mix in the syntax ParseWorkload reads, operations in
// report order.
func (m Mix) String() string {
	if len(m) == 1 {
		for op := range m {
			return string(op)
		}
	}
	var parts []string
	for _, op := range AllOps {
		if w := m[op]; w > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", op, w))
		}
	}
	return strings.Join(parts, ",")
}

// Has reports whether op has a positive weight.
func (m Mix) Has(op Op) bool { return m[op] > 0 }

// Only reports whether op is the only operation.
func (m Mix) Only(op Op) bool { return len(m) == 1 && m[op] > 0 }

// NeedsKeyspace reports whether the workload reads or deletes existing
// objects, so they must be written before the timed phase.
func (m Mix) NeedsKeyspace() bool { return !m.Only(OpPut) }

// picker draws operations by weight from a uniform 64-bit number.
type picker struct {
	ops  []Op
	cumw []uint64
}

func newPicker(m Mix) picker {
	var p picker
	var total uint64
	for _, op := range AllOps {
		if w := m[op]; w > 0 {
			total += uint64(w)
			p.ops = append(p.ops, op)
			p.cumw = append(p.cumw, total)
		}
	}
	return p
}

func (p picker) pick(u uint64) Op {
	r := u % p.cumw[len(p.cumw)-1]
	i := sort.Search(len(p.cumw), func(i int) bool { return r < p.cumw[i] })
	return p.ops[i]
}

// Options describe one workload. The zero value of every field means its
// default (see EnsureDefaults); Validate rejects bad combinations.
type Options struct {
	// Workload is the operation mix. Default: put.
	Workload Mix
	// Sizes is the object-size distribution. Default: 4KiB.
	Sizes SizeDist
	// Concurrency is the number of clients issuing requests in parallel,
	// each with at most one request in flight. Default 16: the count the
	// project's targets are stated for.
	Concurrency int
	// Duration bounds the timed phase. Default 10s unless Count is set.
	Duration time.Duration
	// Count bounds the timed phase by operations (all clients together);
	// 0 means no bound. With both set the run stops at whichever comes first.
	Count int64
	// Warmup runs the workload untimed before the timed phase, to fill
	// connection pools and caches. Default 0 (off); 2s is a good choice.
	Warmup time.Duration
	// Objects is the keyspace size for workloads that read, overwrite or
	// delete existing objects. 0 picks min(1000, max(64, 1GiB/mean size)):
	// enough distinct keys to defeat a trivial hot-object cache while
	// keeping the untimed preparation under ~1 GiB.
	Objects int
	// Bucket is created if missing. Default "terrace-bench".
	Bucket string
	// Prefix starts every key this run writes. Default "bench/".
	Prefix string
	// Seed determines object content and sizes, and the operation sequence
	// of each client. Default 1.
	Seed uint64
	// NoVerify turns off the byte-for-byte check of GET bodies.
	NoVerify bool
	// ListMaxKeys is the page size of a LIST request. Default 1000 (the S3 maximum).
	ListMaxKeys int
	// KeepObjects leaves the objects (and the bucket) in place after the run.
	KeepObjects bool
	// ReuseObjects makes a read workload's untimed preparation HEAD each
	// keyspace object first and write only those missing or of another
	// size: objects a previous run left with KeepObjects (same prefix,
	// seed and sizes; possibly written through another endpoint of the
	// same cluster) are read where they were placed.
	ReuseObjects bool
	// SignPayload hashes every PUT body into its SigV4 signature instead of
	// sending UNSIGNED-PAYLOAD. Off by default: on a 2-core machine shared
	// with the server, client-side SHA-256 of large bodies steals CPU from
	// the system under test and measures the client instead.
	SignPayload bool
	// OpTimeout bounds a single request. Default 60s.
	OpTimeout time.Duration
	// MaxErrors stops a run once this many requests have failed, so a dead
	// endpoint does not spin for the full duration. Default 1000.
	MaxErrors int64
}

// Limits on options; each keeps a mistyped flag from exhausting the machine.
const (
	// MaxConcurrency bounds client goroutines and HTTP connections.
	MaxConcurrency = 4096
	// MaxObjects bounds the keyspace (its state costs a few bytes per key,
	// preparing it costs Objects × mean size of writes).
	MaxObjects = 10_000_000
	// MaxInflightBytes bounds Concurrency × the largest object, i.e. the
	// bytes a run may hold in flight at once. Bodies are streamed, so this
	// is about server-side buffering and the time a single run takes.
	MaxInflightBytes = 64 * GiB
)

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if len(o.Workload) == 0 {
		o.Workload = Mix{OpPut: 1}
	}
	if o.Sizes.IsZero() {
		o.Sizes = MustParseSizeDist("4KiB")
	}
	if o.Concurrency == 0 {
		o.Concurrency = 16
	}
	if o.Duration == 0 && o.Count == 0 {
		o.Duration = 10 * time.Second
	}
	if o.Objects == 0 {
		mean := math.Max(o.Sizes.Mean(), 1)
		o.Objects = int(math.Min(1000, math.Max(64, float64(GiB)/mean)))
	}
	if o.Bucket == "" {
		o.Bucket = "terrace-bench"
	}
	if o.Prefix == "" {
		o.Prefix = "bench/"
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ListMaxKeys == 0 {
		o.ListMaxKeys = 1000
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 60 * time.Second
	}
	if o.MaxErrors == 0 {
		o.MaxErrors = 1000
	}
}

// Validate rejects options that cannot run. Call it after EnsureDefaults.
func (o *Options) Validate() error {
	switch {
	case len(o.Workload) == 0:
		return errors.New("bench: no workload")
	case o.Sizes.IsZero():
		return errors.New("bench: no size distribution")
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return fmt.Errorf("bench: concurrency %d out of range [1, %d]", o.Concurrency, MaxConcurrency)
	case o.Duration < 0 || o.Count < 0 || o.Warmup < 0:
		return errors.New("bench: duration, count and warm-up must not be negative")
	case o.Duration == 0 && o.Count == 0:
		return errors.New("bench: need a duration or an operation count")
	case o.Objects < 1 || o.Objects > MaxObjects:
		return fmt.Errorf("bench: objects %d out of range [1, %d]", o.Objects, MaxObjects)
	case o.ListMaxKeys < 1 || o.ListMaxKeys > 1000:
		return fmt.Errorf("bench: list page size %d out of range [1, 1000]", o.ListMaxKeys)
	case o.OpTimeout <= 0:
		return errors.New("bench: op timeout must be positive")
	case o.MaxErrors < 1:
		return errors.New("bench: max errors must be positive")
	case !validBucketName(o.Bucket):
		return fmt.Errorf("bench: bucket %q is not a valid S3 bucket name (3-63 of a-z, 0-9, '-', '.')", o.Bucket)
	}
	if inflight := int64(o.Concurrency) * o.Sizes.Max(); inflight > MaxInflightBytes {
		return fmt.Errorf("bench: %d clients × %s objects = %s in flight, above the %s limit",
			o.Concurrency, FormatBytes(o.Sizes.Max()), FormatBytes(inflight), FormatBytes(MaxInflightBytes))
	}
	return nil
}

func validBucketName(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (c == '-' || c == '.') && i > 0 && i < len(b)-1
		if !ok {
			return false
		}
	}
	return true
}

// String prints the options in flag syntax so a run can be logged and
// repeated.
func (o Options) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "--workload=%s --size=%s --concurrency=%d", o.Workload, o.Sizes, o.Concurrency)
	if o.Duration > 0 {
		fmt.Fprintf(&b, " --duration=%s", o.Duration)
	}
	if o.Count > 0 {
		fmt.Fprintf(&b, " --count=%d", o.Count)
	}
	if o.Warmup > 0 {
		fmt.Fprintf(&b, " --warmup=%s", o.Warmup)
	}
	if o.Workload.NeedsKeyspace() {
		fmt.Fprintf(&b, " --objects=%d", o.Objects)
	}
	fmt.Fprintf(&b, " --bucket=%s --prefix=%s --seed=%d", o.Bucket, o.Prefix, o.Seed)
	if o.NoVerify {
		b.WriteString(" --verify=false")
	}
	if o.Workload.Has(OpList) {
		fmt.Fprintf(&b, " --list-max-keys=%d", o.ListMaxKeys)
	}
	if o.KeepObjects {
		b.WriteString(" --keep")
	}
	if o.ReuseObjects {
		b.WriteString(" --reuse")
	}
	if o.SignPayload {
		b.WriteString(" --sign-payload")
	}
	return b.String()
}
