package server

import (
	"strings"
	"testing"
)

// The Dockerfile's listeners (0.0.0.0) with no TERRACE_ROOT_PASSWORD would
// serve the published root keys terrace/terrace-secret to anyone: Validate
// refuses them off loopback unless the demo opt-in is set.
func TestDefaultRootPasswordRefusedOffLoopback(t *testing.T) {
	c := Config{S3Address: "0.0.0.0:9000", AdminAddress: "0.0.0.0:9001", DataDir: t.TempDir()}
	c.ApplyEnv(func(string) string { return "" })
	c.EnsureDefaults()
	_, err := c.Validate()
	if err == nil {
		t.Fatalf("config with root %q/%q on %s and %s validated", c.RootUser, c.RootPassword, c.S3Address, c.AdminAddress)
	}
	for _, want := range []string{"TERRACE_ROOT_PASSWORD", "--insecure-default-credentials", "0.0.0.0:9000"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}

	cases := []struct {
		name     string
		s3, adm  string
		password string
		env      map[string]string
		optIn    bool
		ok       bool
	}{
		{"defaults", "", "", "", nil, false, true},
		{"loopback v4", "127.0.0.1:9000", "127.0.0.2:9001", "", nil, false, true},
		{"localhost", "localhost:9000", "LOCALHOST:9001", "", nil, false, true},
		{"loopback v6", "[::1]:9000", "[::1]:9001", "", nil, false, true},
		{"admin public", "127.0.0.1:9000", "0.0.0.0:9001", "", nil, false, false},
		{"s3 on every interface", ":9000", "127.0.0.1:9001", "", nil, false, false},
		{"s3 on every v6 interface", "[::]:9000", "127.0.0.1:9001", "", nil, false, false},
		{"a host name", "node1.example:9000", "127.0.0.1:9001", "", nil, false, false},
		{"a LAN address", "10.0.0.1:9000", "10.0.0.1:9001", "", nil, false, false},
		{"default typed in", "0.0.0.0:9000", "0.0.0.0:9001", DefaultRootPassword, nil, false, false},
		{"own password", "0.0.0.0:9000", "0.0.0.0:9001", "a-long-random-secret", nil, false, true},
		{"own password from env", "0.0.0.0:9000", "0.0.0.0:9001", "", map[string]string{"TERRACE_ROOT_PASSWORD": "a-long-random-secret"}, false, true},
		{"opt-in flag", "0.0.0.0:9000", "0.0.0.0:9001", "", nil, true, true},
		{"opt-in env", "0.0.0.0:9000", "0.0.0.0:9001", "", map[string]string{"TERRACE_INSECURE_DEFAULT_CREDENTIALS": "true"}, false, true},
		{"opt-in env off", "0.0.0.0:9000", "0.0.0.0:9001", "", map[string]string{"TERRACE_INSECURE_DEFAULT_CREDENTIALS": "0"}, false, false},
	}
	for _, tc := range cases {
		c := Config{S3Address: tc.s3, AdminAddress: tc.adm, RootPassword: tc.password, InsecureDefaultCredentials: tc.optIn, DataDir: t.TempDir()}
		c.ApplyEnv(func(k string) string { return tc.env[k] })
		c.EnsureDefaults()
		_, err := c.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("%s: Validate: %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
