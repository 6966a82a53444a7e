package bench

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	def := Endpoint{Access: "dk", Secret: "ds"}
	for _, tc := range []struct {
		spec string
		want Endpoint
	}{
		{"terrace=http://127.0.0.1:9000,access=KEY,secret=SECRET,pid=1234",
			Endpoint{Name: "terrace", URL: "http://127.0.0.1:9000", Access: "KEY", Secret: "SECRET", Region: "us-east-1", PID: 1234}},
		{"cluster=http://127.0.0.1:9000,access=KEY,secret=SECRET,pid=11+12+13",
			Endpoint{Name: "cluster", URL: "http://127.0.0.1:9000", Access: "KEY", Secret: "SECRET", Region: "us-east-1", PID: 11, MorePIDs: []int{12, 13}}},
		{"c3=http://127.0.0.1:9000,pid=11+12,metrics=http://127.0.0.1:9101+https://127.0.0.1:9111/",
			Endpoint{Name: "c3", URL: "http://127.0.0.1:9000", Access: "dk", Secret: "ds", Region: "us-east-1", PID: 11, MorePIDs: []int{12},
				MetricsURLs: []string{"http://127.0.0.1:9101", "https://127.0.0.1:9111"}}},
		{"http://127.0.0.1:7070",
			Endpoint{Name: "127.0.0.1:7070", URL: "http://127.0.0.1:7070", Access: "dk", Secret: "ds", Region: "us-east-1"}},
		{"vgw=http://localhost:7070/,secret=s=with=equals,region=eu-west-1",
			Endpoint{Name: "vgw", URL: "http://localhost:7070", Access: "dk", Secret: "s=with=equals", Region: "eu-west-1"}},
		{" minio = https://[::1]:9000 , ACCESS = a ",
			Endpoint{Name: "minio", URL: "https://[::1]:9000", Access: "a", Secret: "ds", Region: "us-east-1"}},
	} {
		got, err := ParseEndpoint(tc.spec, def)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseEndpoint(%q) =\n  %+v, %v\nwant\n  %+v", tc.spec, got, err, tc.want)
		}
	}
}

func TestParseEndpointErrors(t *testing.T) {
	def := Endpoint{Access: "dk", Secret: "ds"}
	for _, tc := range []struct {
		spec string
		def  Endpoint
		want string
	}{
		{"", def, "empty endpoint spec"},
		{"terrace", def, "must be NAME=URL or a URL"},
		{"=http://h:1", def, "empty name before '='"},
		{"a=ftp://h:1", def, "not an http:// or https:// URL"},
		{"a=http://", def, "not an http:// or https:// URL"},
		{"a=127.0.0.1:9000", def, "not an http:// or https:// URL"},
		{"a=http://h:1/bucket", def, "must not have a path or query"},
		{"a=http://h:1,pid=abc", def, "pid \"abc\" must be a positive integer"},
		{"a=http://h:1,pid=0", def, "must be a positive integer"},
		{"a=http://h:1,pid=1+", def, "several joined by +"},
		{"a=http://h:1,user=x", def, "unknown field \"user\""},
		{"a=http://h:1,metrics=h:9101", def, "must be admin URLs"},
		{"a=http://h:1,metrics=http://h:9101+", def, "must be admin URLs"},
		{"a=http://h:1,metrics=http://h:9101/metrics", def, "must be admin URLs"},
		{"a=http://h:1,access", def, "is not KEY=VALUE"},
		{"a=http://h:1,access=x,access=y", def, "access given twice"},
		{"a=http://h:1", Endpoint{}, "has no access key"},
		{"a=http://h:1,access=k", Endpoint{}, "has no secret key"},
		{"bad name=http://h:1", def, "(got \"bad name\")"},
	} {
		_, err := ParseEndpoint(tc.spec, tc.def)
		if err == nil || !strings.HasPrefix(err.Error(), "bench: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseEndpoint(%q) error = %v; want one containing %q", tc.spec, err, tc.want)
		}
	}
}

func TestEndpointStringHidesSecret(t *testing.T) {
	ep, err := ParseEndpoint("t=http://h:1,access=k,secret=TOPSECRET,pid=9", Endpoint{})
	if err != nil {
		t.Fatal(err)
	}
	if s := ep.String(); strings.Contains(s, "TOPSECRET") || s != "t=http://h:1,access=k,secret=…,pid=9" {
		t.Errorf("String() = %q", s)
	}
}
