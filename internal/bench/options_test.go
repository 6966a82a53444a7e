package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseWorkload(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"put", "put"}, {"GET", "get"}, {" head ", "head"}, {"list", "list"}, {"delete", "delete"},
		{"mixed", "put=25,get=60,head=5,list=5,delete=5"},
		{"get=70,put=30", "put=30,get=70"},
		{"get=70,put=0", "get"},
	} {
		m, err := ParseWorkload(tc.in)
		if err != nil || m.String() != tc.want {
			t.Errorf("ParseWorkload(%q) = %q, %v; want %q", tc.in, m, err, tc.want)
		}
		// The printed form parses back to the same mix.
		if m2, err := ParseWorkload(m.String()); err != nil || m2.String() != m.String() {
			t.Errorf("round trip of %q: %q, %v", m, m2, err)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"", "empty workload"},
		{"copy", "want put, get, head, list, delete, mixed"},
		{"get=70,copy=30", "unknown operation \"copy\""},
		{"get=70,get=30", "get given twice"},
		{"get=-1", "non-negative integer"},
		{"get=x", "non-negative integer"},
		{"get", ""},
		{"get=0,put=0", "all weights are zero"},
		{"get=1,put", "is not OP=WEIGHT"},
	} {
		_, err := ParseWorkload(tc.in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("ParseWorkload(%q): %v", tc.in, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), "bench: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseWorkload(%q) error = %v; want %q", tc.in, err, tc.want)
		}
	}
}

func TestPickerWeights(t *testing.T) {
	m, _ := ParseWorkload("get=70,put=20,delete=10")
	p := newPicker(m)
	counts := map[Op]int{}
	for i := range 100_000 {
		counts[p.pick(mix64(uint64(i)))]++
	}
	for op, want := range map[Op]float64{OpGet: 0.7, OpPut: 0.2, OpDelete: 0.1} {
		if f := float64(counts[op]) / 100_000; f < want-0.01 || f > want+0.01 {
			t.Errorf("%s picked %.3f of the time, want %.2f", op, f, want)
		}
	}
	if counts[OpHead]+counts[OpList] != 0 {
		t.Error("picked an op with no weight")
	}
}

func TestOptionsDefaults(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	want := "--workload=put --size=4KiB --concurrency=16 --duration=10s --bucket=terrace-bench --prefix=bench/ --seed=1"
	if o.String() != want {
		t.Errorf("String() =\n  %s\nwant\n  %s", o, want)
	}
	// Auto keyspace: 1000 small objects, 256 of 4 MiB, at least 64.
	for size, want := range map[string]int{"4KiB": 1000, "4MiB": 256, "1GiB": 64} {
		o := Options{Sizes: MustParseSizeDist(size), Workload: Mix{OpGet: 1}}
		o.EnsureDefaults()
		if o.Objects != want {
			t.Errorf("%s: auto objects %d, want %d", size, o.Objects, want)
		}
	}
	o = Options{Count: 100}
	o.EnsureDefaults()
	if o.Duration != 0 {
		t.Error("a count alone must not get a default duration")
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		mod  func(*Options)
		want string
	}{
		{func(o *Options) { o.Concurrency = -1 }, "concurrency -1 out of range"},
		{func(o *Options) { o.Concurrency = MaxConcurrency + 1 }, "concurrency"},
		{func(o *Options) { o.Duration = -time.Second }, "must not be negative"},
		{func(o *Options) { o.Duration, o.Count = 0, 0 }, "need a duration or an operation count"},
		{func(o *Options) { o.Objects = -1 }, "objects -1 out of range"},
		{func(o *Options) { o.ListMaxKeys = 1001 }, "list page size"},
		{func(o *Options) { o.Bucket = "Bad_Bucket" }, "not a valid S3 bucket name"},
		{func(o *Options) { o.Bucket = "-abc" }, "not a valid S3 bucket name"},
		{func(o *Options) { o.Sizes = MustParseSizeDist("5GiB"); o.Concurrency = 16 }, "in flight, above the 64GiB limit"},
	} {
		var o Options
		o.EnsureDefaults()
		tc.mod(&o)
		err := o.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "bench: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want error containing %q, got %v", tc.want, err)
		}
	}
}
