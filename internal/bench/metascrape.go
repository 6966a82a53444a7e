package bench

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// metaCounters are the metadata counters a Terrace node exports
// (terrace_meta_*_total), summed over the nodes of an endpoint.
type metaCounters struct {
	reads, commits, txns float64
}

// metaCounterNames maps the exported names to the fields they fill.
var metaCounterNames = map[string]func(*metaCounters) *float64{
	"terrace_meta_reads_total":        func(c *metaCounters) *float64 { return &c.reads },
	"terrace_meta_commits_total":      func(c *metaCounters) *float64 { return &c.commits },
	"terrace_meta_backend_txns_total": func(c *metaCounters) *float64 { return &c.txns },
}

// scrapeMeta reads the metadata counters from every admin URL (GET
// URL/metrics, signed with the endpoint's keys, which on Terrace are the
// root user's) and sums them.
func scrapeMeta(ctx context.Context, ep Endpoint) (metaCounters, error) {
	var sum metaCounters
	client := adminauth.Client(ep.Access, ep.Secret)
	client.Timeout = 10 * time.Second
	for _, u := range ep.MetricsURLs {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u+"/metrics", nil)
		if err != nil {
			return sum, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return sum, fmt.Errorf("bench: metrics %s: %w", u, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return sum, fmt.Errorf("bench: metrics %s: %s", u, resp.Status)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return sum, fmt.Errorf("bench: metrics %s: %w", u, err)
		}
		found := 0
		for name, field := range metaCounterNames {
			f, ok := fams[name]
			if !ok {
				continue
			}
			found++
			for _, m := range f.GetMetric() {
				*field(&sum) += m.GetCounter().GetValue()
			}
		}
		if found == 0 {
			return sum, fmt.Errorf("bench: metrics %s: no terrace_meta_* counters (not a Terrace admin address?)", u)
		}
	}
	return sum, nil
}

// MetaResult is the metadata work of the timed phase, summed over the
// endpoint's nodes, per completed operation.
type MetaResult struct {
	ReadsPerOp   float64 `json:"reads_per_op"`
	CommitsPerOp float64 `json:"commits_per_op"`
	// TxnsPerOp are transactions the store executed (etcd round trips
	// through raft): below CommitsPerOp when group commit merged them.
	TxnsPerOp float64 `json:"txns_per_op"`
}
