package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/terrace-storage/terrace/internal/model"
	"github.com/terrace-storage/terrace/internal/placement"
)

// The OctopusFS placement comparison (§7.2, Figs 3 and 4): DFSIO with 27
// parallel writers puts 40 GB with U = 3 on 9 workers, each with 4 GB of
// memory, a 64 GB SSD and three 400 GB HDDs (Table 2 throughputs).
//
// Streams share bandwidth: a write pipeline client → m1 → m2 → m3 moves
// at the minimum, over its replicas, of the device's write throughput
// divided by the device's active streams, and, over its network hops
// between distinct nodes, of the node's NIC bandwidth divided by its
// connections in that direction (the same equal-share model as the
// OctopusFS retrieval formula, Eq. 12). Time advances in fixed steps.
const (
	octoWorkers     = 9
	octoRacks       = 3
	octoWriters     = 27
	octoTotalBytes  = 40e9
	octoBlockBytes  = 128e6 // HDFS/OctopusFS block size (§2.1)
	octoNICBps      = 1.25e9
	octoStep        = 0.05 // seconds per simulation step
	octoSampleEvery = 2.0  // seconds between throughput samples
	// octoHeartbeat is the statistics refresh period: HDFS's 3 s
	// DataNode heartbeat, which OctopusFS reuses for its reports (§3.2).
	octoHeartbeat = 3 * time.Second
	// octoTimeLimit stops a policy that cannot finish (simulated seconds).
	octoTimeLimit = 3600.0
)

type octoPolicy struct {
	label  string
	cfg    placement.Config
	vector string
}

func octoPolicies() []octoPolicy {
	moop := func(objs ...placement.Objective) placement.Config {
		return placement.Config{Name: placement.NameMoop, AllowMem: true, Objectives: objs}
	}
	return []octoPolicy{
		{"HDFS-hdd", placement.Config{Name: placement.NameUniform}, "hdd=3"},
		{"HDFS+SSD", placement.Config{Name: placement.NameUniform}, "any=3"},
		{"rules", placement.Config{Name: placement.NameRules, AllowMem: true}, "any=3"},
		{"DB", moop(placement.ObjDataBalance), "any=3"},
		{"LB", moop(placement.ObjLoadBalance), "any=3"},
		{"FT", moop(placement.ObjFaultTolerance), "any=3"},
		{"TM", moop(placement.ObjThroughput), "any=3"},
		{"moop", moop(), "any=3"},
		{"fitness", placement.Config{Name: placement.NameFitness}, "any=3"},
	}
}

type octoStream struct {
	writer  int
	client  model.NodeID
	devs    []int // indexes into cluster devices
	written float64
	rate    float64
}

func runOctopus(o Options, out *output) error {
	thr := newTable("policy", "t_s", "write_MBps_per_worker")
	capTab := newTable("policy", "t_s", "tier", "remaining_pct")
	type result struct {
		label                 string
		meanMBps, seconds     float64
		remaining             map[model.Tier]float64
		unfinished, placeErrs int
	}
	var results []result
	var thrSeries []series
	tiers := []model.Tier{model.TierMem, model.TierSSD, model.TierHDD}
	for pi, op := range octoPolicies() {
		p, err := placement.New(op.cfg)
		if err != nil {
			return err
		}
		vec := model.MustParseVector(op.vector)
		// Cluster.
		var nodes []model.Node
		var devs []model.Device
		for w := range octoWorkers {
			id := model.NodeID(fmt.Sprintf("w%d", w+1))
			rack := fmt.Sprintf("r%d", w%octoRacks+1)
			nodes = append(nodes, model.Node{ID: id, Rack: rack, Up: true, NetBps: octoNICBps})
			add := func(name string, t model.Tier, capb, wbps, rbps float64) {
				devs = append(devs, model.Device{ID: model.DeviceID(string(id) + "/" + name), Node: id, Rack: rack, Tier: t,
					CapacityBytes: int64(capb), WriteBps: wbps, ReadBps: rbps})
			}
			add("mem0", model.TierMem, 4e9, 1897.4e6, 3224.8e6)
			add("ssd0", model.TierSSD, 64e9, 340.6e6, 419.5e6)
			for k := range 3 {
				add(fmt.Sprintf("hdd%d", k), model.TierHDD, 400e9, 126.3e6, 177.1e6)
			}
		}
		base := model.NewSnapshot(simEpoch, nodes, devs)
		devs = base.Devices // sorted; indexes below refer to this order
		used := make([]float64, len(devs))
		streamsOn := make([]int, len(devs))
		nodeIdx := map[model.NodeID]int{}
		for i, n := range base.Nodes {
			nodeIdx[n.ID] = i
		}
		rng := o.rng(uint64(300 + pi))
		var pend placement.Pending
		var stats *model.Snapshot
		lastRefresh := -1e18
		now := 0.0
		view := func() (*model.Snapshot, *model.Snapshot) {
			if now-lastRefresh >= octoHeartbeat.Seconds() {
				ds := make([]model.Device, len(devs))
				for i, d := range devs {
					d.UsedBytes = int64(used[i])
					d.ActiveStreams = streamsOn[i]
					d.QueueLen = streamsOn[i]
					ds[i] = d
				}
				stats = model.NewSnapshot(at(now), base.Nodes, ds)
				lastRefresh = now
				pend.Reset()
			}
			return stats, pend.Adjust(stats, at(now))
		}
		perWriter := octoTotalBytes / octoWriters
		remainingW := make([]float64, octoWriters)
		for i := range remainingW {
			remainingW[i] = perWriter
		}
		streams := make([]*octoStream, octoWriters)
		placeErrs := 0
		startBlock := func(w int) {
			if remainingW[w] <= 0 {
				streams[w] = nil
				return
			}
			client := base.Nodes[w%octoWorkers].ID
			st, v := view()
			rs, err := p.Place(v, placement.Request{Vector: vec, Client: client, Bytes: octoBlockBytes}, rng)
			if err != nil {
				placeErrs++
				streams[w] = nil
				return
			}
			pend.Record(st, at(now), rs, octoBlockBytes)
			s := &octoStream{writer: w, client: client}
			for _, r := range rs {
				i, _ := base.DeviceIndex(r.Device)
				s.devs = append(s.devs, i)
				streamsOn[i]++
			}
			streams[w] = s
		}
		for w := range octoWriters {
			startBlock(w)
		}
		s := series{name: op.label}
		var bytesDone, windowBytes float64
		nextSample := octoSampleEvery
		capSample := func() {
			for _, t := range tiers {
				var c, u float64
				for i, d := range devs {
					if d.Tier == t {
						c += float64(d.CapacityBytes)
						u += used[i]
					}
				}
				capTab.add(op.label, now, string(t), 100*(1-u/c))
			}
		}
		capSample()
		for now < octoTimeLimit {
			active := 0
			// Connection counts for the network share.
			connsOut := make([]int, len(base.Nodes))
			connsIn := make([]int, len(base.Nodes))
			for _, st := range streams {
				if st == nil {
					continue
				}
				active++
				prev := st.client
				for _, i := range st.devs {
					if n := devs[i].Node; n != prev {
						connsOut[nodeIdx[prev]]++
						connsIn[nodeIdx[n]]++
						prev = n
					}
				}
			}
			if active == 0 {
				break
			}
			for _, st := range streams {
				if st == nil {
					continue
				}
				rate := math.Inf(1)
				prev := st.client
				for _, i := range st.devs {
					rate = math.Min(rate, devs[i].WriteBps/float64(streamsOn[i]))
					if n := devs[i].Node; n != prev {
						rate = math.Min(rate, octoNICBps/float64(connsOut[nodeIdx[prev]]))
						rate = math.Min(rate, octoNICBps/float64(connsIn[nodeIdx[n]]))
						prev = n
					}
				}
				st.rate = rate
			}
			now += octoStep
			for w, st := range streams {
				if st == nil {
					continue
				}
				b := math.Min(st.rate*octoStep, octoBlockBytes-st.written)
				st.written += b
				bytesDone += b
				windowBytes += b
				for _, i := range st.devs {
					used[i] += b
				}
				if st.written >= octoBlockBytes-1 {
					for _, i := range st.devs {
						streamsOn[i]--
					}
					remainingW[w] -= octoBlockBytes
					startBlock(w)
				}
			}
			if now >= nextSample {
				mbps := windowBytes / octoSampleEvery / octoWorkers / 1e6
				thr.add(op.label, nextSample, mbps)
				s.add(nextSample, mbps)
				windowBytes = 0
				nextSample += octoSampleEvery
				capSample()
			}
		}
		capSample()
		res := result{label: op.label, seconds: now, placeErrs: placeErrs, remaining: map[model.Tier]float64{}}
		res.meanMBps = bytesDone / now / octoWorkers / 1e6
		for _, t := range tiers {
			var c, u float64
			for i, d := range devs {
				if d.Tier == t {
					c += float64(d.CapacityBytes)
					u += used[i]
				}
			}
			res.remaining[t] = 100 * (1 - u/c)
		}
		for _, r := range remainingW {
			if r > 0 {
				res.unfinished++
			}
		}
		results = append(results, res)
		thrSeries = append(thrSeries, s)
	}
	if err := thr.write(out.path("octopus_throughput.csv")); err != nil {
		return err
	}
	if err := capTab.write(out.path("octopus_capacity.csv")); err != nil {
		return err
	}
	if err := linePlot(out.path("octopus_throughput.png"), plotOpts{
		title:  "Write throughput per worker, DFSIO-like 27 writers, U=3 (OctopusFS Fig 3a)",
		xlabel: "simulated time (s)", ylabel: "MB/s per worker",
	}, thrSeries); err != nil {
		return err
	}
	labels := make([]string, len(results))
	for i, r := range results {
		labels[i] = r.label
	}
	var capSeries []series
	for _, t := range tiers {
		s := series{name: string(t)}
		for _, r := range results {
			s.ys = append(s.ys, r.remaining[t])
		}
		capSeries = append(capSeries, s)
	}
	if err := barPlot(out.path("octopus_capacity.png"), plotOpts{
		title: "Remaining capacity per tier after the run (OctopusFS Fig 4)", ylabel: "remaining capacity (%)",
	}, labels, capSeries); err != nil {
		return err
	}
	out.printf("## OctopusFS-style placement comparison (OctopusFS §7.2, Figs 3-4)\n\n")
	out.printf("9 workers on 3 racks, each with 4 GB memory, a 64 GB SSD and three 400 GB HDDs (Table 2 throughputs), 10 GbE NICs; 27 writers put 40 GB in 128 MB blocks. Device and NIC bandwidth are shared equally among the streams using them; statistics refresh every %v (heartbeat) with placement.Pending. Memory is enabled (at most a third of each block's replicas) for rules and the MOOP family, as in the paper's comparison; the uniform baselines never use it.\n\n", octoHeartbeat)
	out.printf("| policy | mean write MB/s per worker | time to write 40 GB | remaining mem | remaining ssd | remaining hdd | unfinished writers |\n|---|---|---|---|---|---|---|\n")
	var uni, moop float64
	for _, r := range results {
		out.printf("| %s | %.1f | %.0f s | %.1f %% | %.1f %% | %.1f %% | %d |\n", r.label, r.meanMBps, r.seconds, r.remaining[model.TierMem], r.remaining[model.TierSSD], r.remaining[model.TierHDD], r.unfinished)
		switch r.label {
		case "HDFS+SSD":
			uni = r.meanMBps
		case "moop":
			moop = r.meanMBps
		}
	}
	if uni > 0 {
		out.printf("\nmoop vs uniform (HDFS+SSD: uniform over ssd and hdd): %+.0f %% write throughput.", 100*(moop/uni-1))
	}
	out.printf(" Files: `octopus_throughput.csv`, `octopus_throughput.png`, `octopus_capacity.csv`, `octopus_capacity.png`.\n\n")
	return nil
}
