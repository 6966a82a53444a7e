package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/yaml.v3"

	"github.com/terrace-storage/terrace/internal/adminauth"
	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/object"
)

// The Grafana dashboard and the alert rules in deploy/ may only name
// metrics a node really exports: these tests start a real node, do some
// work, scrape /metrics and read every registered descriptor, then check
// every query.

// pendingMetrics are named by deploy/ but registered by a subsystem this
// node may not run yet; the tests log them instead of failing.
var pendingMetrics = map[string]string{
	"terrace_policy_disabled": "registered by the policy manager (internal/policy) on nodes with policies",
}

// synthetic metrics are made by Prometheus itself, not by the node.
var syntheticMetrics = map[string]bool{"up": true}

// nodeMetricNames returns every metric name a real node exposes.
func nodeMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	n := openNode(t, nil)
	ctx := context.Background()
	if err := n.Layer.CreateBucket(ctx, "metrics", n.Config.RootUser, model.Vector{}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Layer.Put(ctx, "metrics", "k", strings.NewReader("some bytes"), object.PutOptions{Size: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Curator.RunJob(ctx, "full", "test"); err != nil {
		t.Fatal(err)
	}
	n.sampler.Take(ctx, n.Layer.Options().Now())
	s := httptest.NewServer(n.AdminHandler())
	defer s.Close()
	resp, err := adminauth.Client(n.Config.RootUser, n.Config.RootPassword).Get(s.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	names := map[string]bool{}
	typeLine := regexp.MustCompile(`(?m)^# TYPE (\S+) (\S+)$`)
	for _, m := range typeLine.FindAllStringSubmatch(string(body), -1) {
		names[m[1]] = true
		switch m[2] {
		case "histogram":
			names[m[1]+"_bucket"], names[m[1]+"_sum"], names[m[1]+"_count"] = true, true, true
		case "summary":
			names[m[1]+"_sum"], names[m[1]+"_count"] = true, true
		}
	}
	// Vectors without children yet (e.g. tasks failed by kind) are not in
	// the scrape; their descriptors are registered all the same.
	ch := make(chan *prometheus.Desc, 64)
	go func() { n.Reg.Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	if !names["terrace_device_used_bytes"] || !names["terrace_curator_job_seconds_bucket"] || !names["terrace_object_client_op_seconds_bucket"] {
		t.Fatalf("the node's metric names look incomplete: %v", sortedKeys(names))
	}
	return names
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNames extracts the metric names a PromQL expression selects:
// identifiers outside strings, label matchers, ranges and grouping
// clauses that are not functions or keywords.
func metricNames(expr string) []string {
	e := promStrings.ReplaceAllString(expr, `""`)
	e = promMatchers.ReplaceAllString(e, " ")
	e = promRanges.ReplaceAllString(e, " ")
	e = promGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(e, -1) {
		name := e[loc[0]:loc[1]]
		rest := strings.TrimLeft(e[loc[1]:], " \t\n")
		if promKeywords[name] || strings.HasPrefix(rest, "(") {
			continue
		}
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // a number's exponent or unit, e.g. 1e6
		}
		out = append(out, name)
	}
	return out
}

func TestPromQLMetricNames(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (tier) (terrace_device_used_bytes) / sum by (tier) (terrace_device_capacity_bytes) > 0.85`:     "terrace_device_used_bytes terrace_device_capacity_bytes",
		`histogram_quantile(0.99, sum by (le) (rate(terrace_object_client_op_seconds_bucket{job="a b"}[5m])))`: "terrace_object_client_op_seconds_bucket",
		`up{job="terrace"} == 0`:                                                      "up",
		`count(max by (node) (terrace_node_up) == 0) or vector(0)`:                    "terrace_node_up",
		`sum(increase(x_total[$__rate_interval])) + 1e6 and on(instance) y offset 5m`: "x_total y",
	} {
		if got := strings.Join(metricNames(expr), " "); got != want {
			t.Errorf("metricNames(%s) = %q, want %q", expr, got, want)
		}
	}
}

func checkNames(t *testing.T, where string, exprs []string, known map[string]bool) {
	t.Helper()
	if len(exprs) == 0 {
		t.Fatalf("%s: no queries found", where)
	}
	for _, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("%s: query %q names no metric", where, e)
		}
		for _, name := range names {
			switch {
			case known[name], syntheticMetrics[name]:
			case pendingMetrics[name] != "":
				t.Logf("%s: %s is not registered by this node: %s", where, name, pendingMetrics[name])
			default:
				t.Errorf("%s: query %q names %s, which the node does not export", where, e, name)
			}
		}
	}
}

func deployFile(t *testing.T, rel string) string {
	t.Helper()
	p := filepath.Join("..", "..", "deploy", rel)
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

type grafanaPanel struct {
	ID         int                       `json:"id"`
	Type       string                    `json:"type"`
	Title      string                    `json:"title"`
	Datasource map[string]any            `json:"datasource"`
	GridPos    *struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []grafanaPanel `json:"panels"`
}

func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(deployFile(t, "grafana/terrace.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string         `json:"uid"`
		Title      string         `json:"title"`
		Panels     []grafanaPanel `json:"panels"`
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("deploy/grafana/terrace.json is not valid JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Templating.List) == 0 || d.Templating.List[0].Type != "datasource" {
		t.Errorf("dashboard uid %q title %q templating %+v", d.UID, d.Title, d.Templating.List)
	}
	var exprs []string
	ids := map[int]bool{}
	var walk func(ps []grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("panel %q has a bad gridPos %+v", p.Title, p.GridPos)
			}
			if p.Type != "row" {
				if len(p.Targets) == 0 || p.Datasource["uid"] != "${datasource}" {
					t.Errorf("panel %q: %d targets, datasource %v", p.Title, len(p.Targets), p.Datasource)
				}
				for _, tg := range p.Targets {
					exprs = append(exprs, tg.Expr)
				}
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	checkNames(t, "grafana/terrace.json", exprs, nodeMetricNames(t))
}

func TestAlertRules(t *testing.T) {
	path := deployFile(t, "prometheus/alerts.yml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	var exprs []string
	alerts := map[string]bool{}
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" || r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("rule %+v lacks alert, expr, severity, summary or description", r)
			}
			if alerts[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			alerts[r.Alert] = true
			exprs = append(exprs, r.Expr)
		}
	}
	// The alerts operators were promised.
	for _, want := range []string{"TerraceNodeDown", "TerraceDeviceFailed", "TerraceUnderReplicated", "TerraceTierAlmostFull",
		"TerraceScrubFoundCorruption", "TerracePolicyDisabled"} {
		if !alerts[want] {
			t.Errorf("no %s alert", want)
		}
	}
	checkNames(t, "prometheus/alerts.yml", exprs, nodeMetricNames(t))

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Log("promtool not installed (Debian package prometheus): rule syntax and behaviour not checked by promtool")
		return
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = filepath.Dir(path)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
