package bench

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// Endpoint is an S3 service under test.
type Endpoint struct {
	// Name labels the endpoint in reports ("terrace", "versitygw").
	Name string `json:"name"`
	// URL is the service root, e.g. http://127.0.0.1:9000 (path-style
	// requests are sent to URL/bucket/key).
	URL string `json:"url"`
	// Access and Secret are static SigV4 credentials.
	Access string `json:"access"`
	Secret string `json:"-"`
	// Region is the SigV4 signing region. Default us-east-1.
	Region string `json:"region"`
	// PID, when non-zero, is the local server process whose CPU time and
	// peak memory are reported.
	PID int `json:"pid,omitempty"`
	// MorePIDs are the service's other local processes (the other nodes
	// of a cluster, "pid=A+B+C"): their CPU is added to PID's, so a
	// cluster's cost per operation is comparable with one node's.
	MorePIDs []int `json:"more_pids,omitempty"`
	// MetricsURLs are the admin addresses of the service's Terrace nodes
	// ("metrics=http://h:9101+http://h:9111"): the metadata reads and
	// transactions they report are summed per operation.
	MetricsURLs []string `json:"metrics_urls,omitempty"`
}

// PIDs returns every local server process of the endpoint.
func (e Endpoint) PIDs() []int {
	if e.PID <= 0 {
		return nil
	}
	return append([]int{e.PID}, e.MorePIDs...)
}

// DefaultRegion is the signing region when none is given.
const DefaultRegion = "us-east-1"

// ParseEndpoint parses an endpoint spec:
//
//	NAME=URL[,access=KEY][,secret=SECRET][,pid=PID][,region=REGION][,metrics=ADMIN-URL+…]
//	URL[,access=…]        (the name defaults to the URL's host:port)
//
// Fields missing from the spec are taken from defaults (typically the
// --access-key/--secret-key flags). Access, secret and URL must end up set.
func ParseEndpoint(spec string, defaults Endpoint) (Endpoint, error) {
	fields := strings.Split(strings.TrimSpace(spec), ",")
	if len(fields) == 0 || strings.TrimSpace(fields[0]) == "" {
		return Endpoint{}, errors.New("bench: empty endpoint spec; want NAME=URL,access=KEY,secret=SECRET[,pid=PID]")
	}
	ep := defaults
	ep.PID = 0
	first := strings.TrimSpace(fields[0])
	if strings.HasPrefix(first, "http://") || strings.HasPrefix(first, "https://") {
		ep.URL, ep.Name = first, ""
	} else {
		name, u, ok := strings.Cut(first, "=")
		if !ok && strings.Contains(first, "://") {
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: %q is not an http:// or https:// URL with a host", spec, first)
		}
		if !ok {
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: first field %q must be NAME=URL or a URL", spec, first)
		}
		ep.Name, ep.URL = strings.TrimSpace(name), strings.TrimSpace(u)
		if ep.Name == "" {
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: empty name before '='", spec)
		}
	}
	u, err := url.Parse(ep.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Endpoint{}, fmt.Errorf("bench: endpoint %q: %q is not an http:// or https:// URL with a host", spec, ep.URL)
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" {
		return Endpoint{}, fmt.Errorf("bench: endpoint %q: URL %q must not have a path or query (requests are path-style)", spec, ep.URL)
	}
	ep.URL = u.Scheme + "://" + u.Host
	if ep.Name == "" {
		ep.Name = u.Host
	}
	seen := map[string]bool{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		k, v = strings.ToLower(strings.TrimSpace(k)), strings.TrimSpace(v)
		if !ok || k == "" {
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: field %q is not KEY=VALUE", spec, f)
		}
		if seen[k] {
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: %s given twice", spec, k)
		}
		seen[k] = true
		switch k {
		case "access":
			ep.Access = v
		case "secret":
			ep.Secret = v
		case "region":
			ep.Region = v
		case "pid":
			for i, f := range strings.Split(v, "+") {
				pid, err := strconv.Atoi(f)
				if err != nil || pid <= 0 {
					return Endpoint{}, fmt.Errorf("bench: endpoint %q: pid %q must be a positive integer or several joined by + (one per node)", spec, v)
				}
				if i == 0 {
					ep.PID = pid
				} else {
					ep.MorePIDs = append(ep.MorePIDs, pid)
				}
			}
		case "metrics":
			for _, f := range strings.Split(v, "+") {
				mu, err := url.Parse(f)
				if err != nil || (mu.Scheme != "http" && mu.Scheme != "https") || mu.Host == "" || (mu.Path != "" && mu.Path != "/") {
					return Endpoint{}, fmt.Errorf("bench: endpoint %q: metrics %q must be admin URLs (http://host:port) joined by +, one per node", spec, v)
				}
				ep.MetricsURLs = append(ep.MetricsURLs, mu.Scheme+"://"+mu.Host)
			}
		default:
			return Endpoint{}, fmt.Errorf("bench: endpoint %q: unknown field %q (want access, secret, pid, region or metrics)", spec, k)
		}
	}
	if ep.Region == "" {
		ep.Region = DefaultRegion
	}
	if err := ep.Validate(); err != nil {
		return Endpoint{}, fmt.Errorf("bench: endpoint %q: %w", spec, err)
	}
	return ep, nil
}

// Validate checks that the endpoint can be used.
func (e Endpoint) Validate() error {
	switch {
	case !validName(e.Name):
		return fmt.Errorf("bench: endpoint name must be 1-32 characters from A-Z a-z 0-9 and . _ - : (got %q)", e.Name)
	case e.URL == "":
		return errors.New("bench: endpoint has no URL")
	case e.Access == "":
		return fmt.Errorf("bench: endpoint %s has no access key (add access=KEY or --access-key)", e.Name)
	case e.Secret == "":
		return fmt.Errorf("bench: endpoint %s has no secret key (add secret=SECRET or --secret-key)", e.Name)
	case e.PID < 0:
		return fmt.Errorf("bench: endpoint %s: negative pid", e.Name)
	}
	return nil
}

func validName(s string) bool {
	if len(s) < 1 || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._-:", c)) {
			return false
		}
	}
	return true
}

// String prints the endpoint in spec syntax with the secret elided.
func (e Endpoint) String() string {
	s := e.Name + "=" + e.URL + ",access=" + e.Access + ",secret=…"
	for i, pid := range e.PIDs() {
		if i == 0 {
			s += ",pid=" + strconv.Itoa(pid)
		} else {
			s += "+" + strconv.Itoa(pid)
		}
	}
	if e.Region != "" && e.Region != DefaultRegion {
		s += ",region=" + e.Region
	}
	if len(e.MetricsURLs) > 0 {
		s += ",metrics=" + strings.Join(e.MetricsURLs, "+")
	}
	return s
}
