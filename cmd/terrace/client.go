package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/tlsconf"
)

// apiClient talks to a node's admin API.
type apiClient struct {
	base string
	hc   *http.Client
	err  error // a client that could not be built (bad --ca-cert) fails every call with it
}

func (g *globalFlags) client() *apiClient {
	base := strings.TrimRight(g.endpoint, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	hc := &http.Client{Timeout: 0}
	var rt http.RoundTripper = http.DefaultTransport
	if g.caCert != "" {
		tc, err := tlsconf.ClientTrusting(g.caCert)
		if err != nil {
			return &apiClient{base: base, hc: hc, err: err}
		}
		rt = &http.Transport{TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment}
	}
	hc.Transport = rt
	if g.accessKey != "" || g.secretKey != "" {
		hc.Transport = &adminauth.Transport{Base: rt, AccessKey: g.accessKey, SecretKey: g.secretKey}
	}
	return &apiClient{base: base, hc: hc}
}

type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

func (c *apiClient) do(method, path string, q url.Values, body io.Reader, size int64) (*http.Response, error) {
	if c.err != nil {
		return nil, c.err
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if size >= 0 && body != nil {
		req.ContentLength = size
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the node at %s (is 'terrace server' running? set --endpoint): %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e apiError
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			return nil, fmt.Errorf("%s (%s)", e.Error, e.Code)
		}
		return nil, fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return resp, nil
}

func (c *apiClient) getJSON(path string, q url.Values, out any) error {
	return c.callJSON(http.MethodGet, path, q, out)
}

func (c *apiClient) callJSON(method, path string, q url.Values, out any) error {
	resp, err := c.do(method, path, q, nil, -1)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func splitBucketKey(s string) (string, string, error) {
	s = strings.TrimPrefix(s, "s3://")
	b, k, ok := strings.Cut(s, "/")
	if !ok || b == "" || k == "" {
		return "", "", fmt.Errorf("want BUCKET/KEY, got %q", s)
	}
	return b, k, nil
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func pct(a, b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(a)/float64(b))
}

func ago(t time.Time) string { return time.Since(t).Round(time.Second).String() }
