package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/bench"
	"github.com/terrace-storage/terrace/internal/bench/benchtest"
)

func TestMain(m *testing.M) {
	benchtest.MaybeRunFakeTerrace()
	code := m.Run()
	benchtest.Cleanup()
	os.Exit(code)
}

// run executes `bench ARGS…` and returns stdout, stderr and the error.
func run(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	cmd := Command()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestCommandTreeTeaches(t *testing.T) {
	cmd := Command()
	if cmd.Use != "bench" || cmd.Example == "" {
		t.Fatalf("root: %q, example %q", cmd.Use, cmd.Example)
	}
	want := map[string]bool{"s3": false, "compare": false, "device": false}
	for _, c := range cmd.Commands() {
		if _, ok := want[c.Name()]; ok {
			want[c.Name()] = true
			if c.Example == "" || c.Long == "" {
				t.Errorf("%s: --help needs Long and Example", c.Name())
			}
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("missing subcommand %s", name)
		}
	}
	out, _, err := run(t, "compare", "--help")
	if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--start-terrace") {
		t.Errorf("compare --help:\n%s", out)
	}
}

func TestScenarioHook(t *testing.T) {
	saved := scenarios
	defer func() { scenarios = saved }()
	RegisterScenario(func() *cobra.Command {
		return &cobra.Command{Use: "tiering", Short: "test scenario", RunE: func(*cobra.Command, []string) error { return nil }}
	})
	found := false
	for _, c := range Command().Commands() {
		found = found || c.Name() == "tiering"
	}
	if !found {
		t.Error("registered scenario is not a subcommand")
	}
}

func gatewayArgs(t *testing.T) []string {
	t.Helper()
	url, err := benchtest.Gateway()
	if err != nil {
		t.Fatal(err)
	}
	return []string{"-e", url, "--access-key", benchtest.Access, "--secret-key", benchtest.Secret}
}

func TestS3CommandJSON(t *testing.T) {
	jsonFile := filepath.Join(t.TempDir(), "out.json")
	args := append([]string{"s3"}, gatewayArgs(t)...)
	args = append(args, "-w", "put", "-s", "4KiB-8KiB", "-n", "30", "-c", "2", "--bucket", "cli-put",
		"--server-pid", itoa(os.Getpid()), "-o", "json", "--json-file", jsonFile)
	out, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("stdout is not a JSON result: %v\n%s", err, out)
	}
	if res.Total.Count != 30 || res.Total.Errors != 0 || res.Server == nil || res.Concurrency != 2 {
		t.Errorf("result %+v", res)
	}
	saved, err := os.ReadFile(jsonFile)
	if err != nil || !bytes.Equal(saved, []byte(out)) {
		t.Errorf("--json-file differs from stdout (%v)", err)
	}
}

func TestS3CommandTable(t *testing.T) {
	args := append([]string{"s3"}, gatewayArgs(t)...)
	args = append(args, "-w", "get=80,head=20", "-n", "40", "--objects", "4", "--bucket", "cli-get", "--warmup", "50ms")
	out, _, err := run(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ops/s", "p99.9", " get ", " head ", "client cpu"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestCompareCommandStartsTerrace(t *testing.T) {
	url, err := benchtest.Gateway()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(benchtest.FakeTerraceEnv, "1")
	exe, _ := os.Executable()
	out, errOut, err := run(t, "compare", "--start-terrace", "--terrace-bin", exe,
		"-e", "vgw="+url+",access="+benchtest.Access+",secret="+benchtest.Secret,
		"-w", "put", "-n", "20", "-c", "2", "--rounds", "2", "--bucket", "cli-cmp", "-o", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "started terrace pid") {
		t.Errorf("stderr: %s", errOut)
	}
	var cr bench.CompareResult
	if err := json.Unmarshal([]byte(out), &cr); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if cr.Rounds != 2 || len(cr.Endpoints) != 2 || cr.Endpoints[1].Endpoint != "terrace" || len(cr.Ratios) != 1 ||
		cr.Endpoints[1].Server == nil {
		t.Errorf("compare result %+v", cr)
	}
}

func TestDeviceCommand(t *testing.T) {
	out, _, err := run(t, "device", t.TempDir(), "--engine", "builtin", "--runtime", "50ms", "--file-size", "4MiB", "--queue-depth", "2")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"builtin", "seq-write", "seq-read", "rand-read", "rand-write", "fsync", "IOPS"} {
		if !strings.Contains(out, want) {
			t.Errorf("device table lacks %q:\n%s", want, out)
		}
	}
}

func TestBadInputErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"s3"}, "bench: need --endpoint"},
		{[]string{"s3", "-e", "http://127.0.0.1:1", "--start-terrace"}, "not both"},
		{[]string{"s3", "-e", "http://127.0.0.1:1", "--size", "huge"}, "bench: object size \"huge\""},
		{[]string{"s3", "-e", "http://127.0.0.1:1", "-w", "copy"}, "bench: workload \"copy\""},
		{[]string{"s3", "-e", "http://127.0.0.1:1", "-c", "0"}, "concurrency must be positive"},
		{[]string{"s3", "-e", "http://127.0.0.1:1", "-o", "yaml"}, "--output \"yaml\""},
		{[]string{"s3", "-e", "ftp://x", "--access-key", "a", "--secret-key", "b"}, "not an http:// or https:// URL"},
		{[]string{"compare", "-e", "a=http://127.0.0.1:1,access=k,secret=s"}, "at least two endpoints"},
		{[]string{"compare", "-e", "a=http://127.0.0.1:1,access=k,secret=s,bogus=1", "-e", "b=http://127.0.0.1:2"}, "unknown field \"bogus\""},
		{[]string{"device"}, "accepts 1 arg(s)"},
		{[]string{"device", "/nonexistent-dir"}, "bench: device"},
		{[]string{"device", "/tmp", "--file-size", "1"}, "out of range [4MiB"},
	} {
		_, _, err := run(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %s: error %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestRootJSONFlagSelectsJSON(t *testing.T) {
	// terrace's root command has a persistent --json; bench honours it.
	root := &cobra.Command{Use: "terrace"}
	root.PersistentFlags().Bool("json", false, "")
	root.AddCommand(Command())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"bench", "device", t.TempDir(), "--json", "--engine", "builtin", "--runtime", "20ms", "--file-size", "4MiB", "--queue-depth", "1"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	var res bench.DeviceResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Tests) != 5 {
		t.Errorf("--json output %q: %v", out.String(), err)
	}
}
