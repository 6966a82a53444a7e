package server

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terrace-storage/terrace/internal/curator"
	"github.com/terrace-storage/terrace/internal/curator/learn"
	"github.com/terrace-storage/terrace/internal/curator/tiersched"
	"github.com/terrace-storage/terrace/internal/object"
)

// tiering.go wires the Curator's tiering scheduler (`curator:
// tiering_scheduler: threshold|qlearning`, docs/design/0006): the
// scheduler itself and the node signals the learned one observes.

// tieringModel loads the learned scheduler's starting model: the JSON
// file the config names (written by `terrace sim tiering --out`), else
// the built-in pre-trained model.
func tieringModel(path string) (*learn.Model, error) {
	if path == "" {
		return learn.Pretrained()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: curator tiering_model: %w", err)
	}
	m, err := learn.ParseModel(b)
	if err != nil {
		return nil, fmt.Errorf("server: curator tiering_model %s: %w", path, err)
	}
	return m, nil
}

// validateTiering checks the tiering thresholds, the scheduler name and,
// for qlearning, that tiering is on and the model.
func (cc CuratorConfig) validateTiering() error {
	// The thresholds are fractions of a tier's capacity (0: the default).
	// Nothing downstream checks them: f = 75 (a percentage) would never
	// be exceeded and h = 15 would shed a whole tier, also in the learned
	// scheduler's forced runs, which shed to f − h.
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"tier_down_above", cc.TierDownAbove}, {"tier_dest_below", cc.TierDestBelow}, {"tier_reduce", cc.TierReduce},
		{"balance_mean", cc.BalanceMean}, {"balance_spread", cc.BalanceSpread},
	} {
		if math.IsNaN(f.v) || f.v < 0 || f.v > 1 {
			return fmt.Errorf("server: curator %s %v: want a fraction of the tier's capacity in [0, 1] (e.g. 0.75 for 75%%; 0 for the default)", f.name, f.v)
		}
	}
	// Only zero means the default downstream: a negative interval, window
	// or read count would be used as is (a negative promote_reads makes
	// every egroup hot).
	if cc.TierCheckInterval < 0 || cc.HotWindow < 0 || cc.PromoteReads < 0 {
		return fmt.Errorf("server: curator tier_check_interval %v, hot_window %v, promote_reads %d: want ≥ 0 (0 for the default)", cc.TierCheckInterval, cc.HotWindow, cc.PromoteReads)
	}
	switch strings.ToLower(cc.TieringScheduler) {
	case "", tiersched.NameThreshold:
		if cc.TieringModel != "" {
			return fmt.Errorf("server: curator tiering_model is set but tiering_scheduler is %q; the model is for qlearning", cc.TieringScheduler)
		}
		return nil
	case tiersched.NameQLearning:
		if cc.Tiering != nil && !*cc.Tiering {
			// With tiering off the Curator never consults a scheduler:
			// the learned one would neither act nor learn, and the
			// operator who configured it would not find out.
			return fmt.Errorf("server: curator tiering_scheduler is %q but tiering: false turns tiering off, so it would never run; remove tiering_scheduler, or turn tiering on", cc.TieringScheduler)
		}
		_, err := tieringModel(cc.TieringModel)
		return err
	}
	return fmt.Errorf("server: curator tiering_scheduler %q: want %s", cc.TieringScheduler, strings.Join(tiersched.Names, " or "))
}

// tieringScheduler builds the configured scheduler and, for qlearning, the
// signal sampler. Errors fall back to the threshold rule, loudly (Validate
// has already checked the configuration).
func (n *Node) tieringScheduler(layer *object.Layer) (curator.TieringScheduler, func() learn.Observation) {
	cc := n.Config.Curator
	if !strings.EqualFold(cc.TieringScheduler, tiersched.NameQLearning) {
		return tiersched.Threshold{}, nil
	}
	// The agent decides at the tiering check interval (default 30 s, the
	// paper's poll) and holds learn.DefaultHoldPolls of them (10 min) after
	// a run, so a compressed schedule (benchmarks) compresses the agent's
	// too.
	poll := cc.TierCheckInterval
	if poll <= 0 {
		poll = learn.DefaultPoll
	}
	m, err := tieringModel(cc.TieringModel)
	if err == nil {
		var s tiersched.Scheduler
		if s, err = tiersched.New(tiersched.NameQLearning, m, learn.AgentOptions{Hold: learn.DefaultHoldPolls * poll}); err == nil {
			q := s.(*tiersched.QLearning)
			q.Poll = poll
			n.Log.Info("curator: learned tiering scheduler", "model_features", strings.Join(m.Features, ","), "epsilon", m.Epsilon, "epsilon_now", m.EpsilonNow(), "poll", poll, "hold", learn.DefaultHoldPolls*poll)
			// A private registry of the layer's counters: gathering it is
			// cheap, unlike the node's (Go runtime, process, devices).
			reg := prometheus.NewRegistry()
			for _, c := range layer.Collectors() {
				if err == nil {
					err = reg.Register(c)
				}
			}
			if err == nil {
				sig := &tierSignals{layer: layer, gather: reg}
				return q, sig.observe
			}
		}
	}
	n.Log.Error("curator: cannot start the learned tiering scheduler; using thresholds", "err", err)
	return tiersched.Threshold{}, nil
}

// tierSignals samples what the learned scheduler observes (Curator
// §4.3.1): the machine's CPU and memory usage (/proc/stat,
// /proc/meminfo; 0 where unavailable), client reads and writes per second
// (the object layer's counters) and their mean latency since the last
// sample. Tier usages come from the cluster snapshot in the scheduler.
type tierSignals struct {
	layer  *object.Layer
	gather prometheus.Gatherer

	mu                 sync.Mutex
	at                 time.Time
	ops                int64
	lat                time.Duration
	gets, puts         float64
	cpuBusy, cpuTotal  uint64
	haveLast, haveProc bool
}

func (s *tierSignals) observe() learn.Observation {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	ops, lat := s.layer.ClientLatencyTotals()
	gets, puts := s.counters()
	busy, total, cpuOK := readCPU()
	var o learn.Observation
	if s.haveLast {
		secs := now.Sub(s.at).Seconds()
		if secs > 0 {
			o.ReadIOPS = max(0, gets-s.gets) / secs
			o.WriteIOPS = max(0, puts-s.puts) / secs
			o.IOPS = o.ReadIOPS + o.WriteIOPS
		}
		if d := ops - s.ops; d > 0 {
			o.Ops = float64(d)
			o.LatencyMs = float64(lat-s.lat) / float64(d) / 1e6
		}
		if cpuOK && s.haveProc && total > s.cpuTotal {
			o.CPU = min(100, 100*float64(busy-s.cpuBusy)/float64(total-s.cpuTotal))
		}
	}
	o.Mem = readMem()
	s.at, s.ops, s.lat, s.gets, s.puts, s.haveLast = now, ops, lat, gets, puts, true
	s.cpuBusy, s.cpuTotal, s.haveProc = busy, total, cpuOK
	return o
}

// counters reads the object layer's read-open and write counters from the
// node's registry.
func (s *tierSignals) counters() (gets, puts float64) {
	mfs, err := s.gather.Gather()
	if err != nil {
		return s.gets, s.puts
	}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		switch mf.GetName() {
		case "terrace_object_gets_total":
			gets = mf.GetMetric()[0].GetCounter().GetValue()
		case "terrace_object_puts_total":
			puts = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return gets, puts
}

// readCPU returns the machine's busy and total jiffies (/proc/stat).
func readCPU() (busy, total uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, v := range fields[1:] {
		x, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += x
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return busy, total, true
}

// readMem returns the machine's memory usage in percent (/proc/meminfo:
// 1 − MemAvailable/MemTotal), 0 when unavailable.
func readMem() float64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var total, avail float64
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "MemTotal:":
			total = v
		case "MemAvailable:":
			avail = v
		}
	}
	if total <= 0 {
		return 0
	}
	return min(100, max(0, 100*(1-avail/total)))
}
