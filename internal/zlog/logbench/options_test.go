package logbench

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndValidation(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if o.Clients != 16 || o.EntryBytes != 4096 || o.Nodes != 3 || o.Vector != "ssd=2" {
		t.Fatalf("defaults: %s", o)
	}
	for _, tc := range []struct {
		mut  func(*Options)
		want string
	}{
		{func(o *Options) { o.Nodes = 0 }, "--nodes"},
		{func(o *Options) { o.Duration = time.Millisecond }, "--duration"},
		{func(o *Options) { o.Clients = 5000 }, "--clients"},
		{func(o *Options) { o.EntryBytes = 2 << 20 }, "--entry-bytes"},
		{func(o *Options) { o.LeaseSizes = []int{0} }, "lease size"},
		{func(o *Options) { o.Depths = []int{1000} }, "depth"},
		{func(o *Options) { o.Experiments = []string{"nope"} }, "unknown experiment"},
		{func(o *Options) { o.FailoverRounds = 99 }, "--failover-rounds"},
	} {
		o := Options{}
		o.EnsureDefaults()
		tc.mut(&o)
		err := o.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", o, err, tc.want)
		}
	}
}
