package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseFioJSON(t *testing.T) {
	out, err := os.ReadFile(filepath.Join(testdata, "fio-randread.json"))
	if err != nil {
		t.Fatal(err)
	}
	// fio sometimes prints warnings before the JSON document.
	out = append([]byte("fio: some warning\n"), out...)
	tr, version, err := parseFioJSON(out, DevRandRead)
	if err != nil {
		t.Fatal(err)
	}
	if version != "fio-3.33" || tr.IOPS < 62701 || tr.IOPS > 62702 || tr.MBPerSec < 256.8 || tr.MBPerSec > 256.9 {
		t.Errorf("randread: %s %+v", version, tr)
	}
	if tr.P50Ms <= 0 || tr.P99Ms < tr.P50Ms {
		t.Errorf("randread latency %+v", tr)
	}

	out, err = os.ReadFile(filepath.Join(testdata, "fio-fsync.json"))
	if err != nil {
		t.Fatal(err)
	}
	tf, _, err := parseFioJSON(out, DevFsync)
	if err != nil {
		t.Fatal(err)
	}
	// The rate is write+fsync pairs; the latency is the fsync's.
	if tf.IOPS < 6656 || tf.IOPS > 6657 || tf.P50Ms <= 0 {
		t.Errorf("fsync %+v", tf)
	}
	for _, bad := range []string{"", "no json here", `{"jobs": []}`, `{"jobs": [{"error": 5}]}`, `{"jobs": [`} {
		if _, _, err := parseFioJSON([]byte(bad), DevSeqRead); err == nil || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("parseFioJSON(%q) = %v", bad, err)
		}
	}
}

func TestDeviceOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		o    DeviceOptions
		want string
	}{
		{DeviceOptions{Engine: "dd"}, "want auto, fio or builtin"},
		{DeviceOptions{Runtime: time.Hour}, "runtime 1h0m0s out of range"},
		{DeviceOptions{FileBytes: MiB}, "out of range [4MiB"},
		{DeviceOptions{FileBytes: 5*MiB + 1}, "whole number of MiB"},
		{DeviceOptions{QueueDepth: 1000}, "queue depth 1000"},
	} {
		tc.o.EnsureDefaults()
		if err := tc.o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
	if _, err := MeasureDevice(context.Background(), filepath.Join(t.TempDir(), "missing"), DeviceOptions{}); err == nil {
		t.Error("missing directory accepted")
	}
}

func TestBuiltinDevice(t *testing.T) {
	dir := t.TempDir()
	res, err := MeasureDevice(context.Background(), dir, DeviceOptions{
		Engine: "builtin", Runtime: 100 * time.Millisecond, FileBytes: 8 * MiB, QueueDepth: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Engine != "builtin" || len(res.Tests) != 5 {
		t.Fatalf("result %+v", res)
	}
	for _, name := range []string{DevSeqWrite, DevSeqRead, DevRandRead, DevRandWrite, DevFsync} {
		if tr := res.Test(name); tr.IOPS <= 0 || tr.MBPerSec <= 0 || tr.P50Ms <= 0 {
			t.Errorf("%s: %+v", name, tr)
		}
	}
	var b strings.Builder
	if err := WriteDeviceTable(&b, res); err != nil || !strings.Contains(b.String(), "rand-read") {
		t.Errorf("table %q, %v", b.String(), err)
	}
	left, _ := os.ReadDir(dir)
	if len(left) != 0 {
		t.Errorf("test files left behind: %v", left)
	}
}
