package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terrace-storage/terrace/internal/chaos/nemesis"
	"github.com/terrace-storage/terrace/internal/chaos/proxy"
	"github.com/terrace-storage/terrace/internal/devcluster"
)

// Executed is what became of one scheduled event.
type Executed struct {
	Event  nemesis.Event `json:"event"`
	Target string        `json:"target,omitempty"` // resolved node(s)
	// Affected are the nodes whose own service the fault degrades (the
	// target; a partition's minority side): clients talking to them are
	// expected to suffer, clients talking to the others should not.
	Affected []string `json:"affected,omitempty"`
	// Times in seconds since the start of the run.
	Start  float64 `json:"start"`
	Healed float64 `json:"healed,omitempty"`
	Ready  float64 `json:"ready,omitempty"` // the target serves again
	// Waited is how long the event waited for the safety envelope.
	Waited  float64 `json:"waited,omitempty"`
	Skipped string  `json:"skipped,omitempty"`
	Detail  string  `json:"detail,omitempty"`
	Err     string  `json:"err,omitempty"`
}

// rot is one flipped byte.
type rot struct {
	Egroup uint64 `json:"egroup"`
	Node   string `json:"node"`
	Device string `json:"device"`
	Path   string `json:"path"`
	Offset int64  `json:"offset"`
	Old    byte   `json:"old"`
	New    byte   `json:"new"`
}

// executor carries out a schedule on a running cluster.
type executor struct {
	r *runner

	mu sync.Mutex
	// Runtime safety envelope: impairments in force per node (events
	// reserve them before they act and release them once the node serves
	// again).
	impaired map[string]int
	// down: killed (or restarting) by us; paused: SIGSTOPped by us.
	down       map[string]bool
	paused     map[string]bool
	restarting map[string]bool
	// Network faults in force by event, and what the proxies apply.
	netFaults map[int]map[proxy.Link]proxy.Fault
	applied   map[proxy.Link]proxy.Fault
	rotted    map[uint64]bool
	rots      []rot
	done      []Executed
	crashes   []string

	wg sync.WaitGroup
}

func newExecutor(r *runner) *executor {
	return &executor{r: r, impaired: map[string]int{}, down: map[string]bool{}, paused: map[string]bool{}, restarting: map[string]bool{},
		netFaults: map[int]map[proxy.Link]proxy.Fault{}, applied: map[proxy.Link]proxy.Fault{}, rotted: map[uint64]bool{}}
}

func (x *executor) since() float64 { return time.Since(x.r.start).Seconds() }

// run starts every event at its time and returns when all are started;
// wait() waits for them to heal.
func (x *executor) run(ctx context.Context, events []nemesis.Event) {
	begin := time.Now()
	for _, e := range events {
		if d := time.Until(begin.Add(e.At)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				return
			}
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			rec := x.apply(ctx, e)
			x.mu.Lock()
			x.done = append(x.done, rec)
			x.mu.Unlock()
			x.r.progress("%s", describe(rec))
		}()
	}
}

func (x *executor) wait() { x.wg.Wait() }

func describe(e Executed) string {
	s := e.Event.String()
	if e.Target != "" && e.Event.Role != "" {
		s += " → " + e.Target
	}
	switch {
	case e.Skipped != "":
		s += " SKIPPED: " + e.Skipped
	case e.Err != "":
		s += " ERROR: " + e.Err
	case e.Ready > 0:
		s += fmt.Sprintf(" (serving again after %.1fs)", e.Ready-e.Start)
	}
	if e.Detail != "" {
		s += " [" + e.Detail + "]"
	}
	return s
}

// executed returns the records, by sequence number.
func (x *executor) executed() []Executed {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := append([]Executed(nil), x.done...)
	sort.Slice(out, func(i, j int) bool { return out[i].Event.Seq < out[j].Event.Seq })
	return out
}

// reserve waits until impairing nodes keeps the runtime envelope — at
// most MaxImpairedNodes impaired, at most one etcd member — and books
// them. It gives up after envelopeWait.
const envelopeWait = 90 * time.Second

func (x *executor) reserve(ctx context.Context, nodes []string) (time.Duration, error) {
	start := time.Now()
	for {
		x.mu.Lock()
		ok := true
		count, members := 0, 0
		for n, k := range x.impaired {
			if k > 0 {
				count++
				if x.r.isMember(n) {
					members++
				}
			}
		}
		for _, n := range nodes {
			if x.impaired[n] > 0 {
				ok = false // one impairment per node at a time
			}
			count++
			if x.r.isMember(n) {
				members++
			}
		}
		if ok && count <= x.r.o.MaxImpairedNodes && members <= 1 {
			for _, n := range nodes {
				x.impaired[n]++
			}
			x.mu.Unlock()
			return time.Since(start), nil
		}
		x.mu.Unlock()
		if time.Since(start) > envelopeWait {
			return time.Since(start), fmt.Errorf("the envelope stayed full for %s", envelopeWait)
		}
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return time.Since(start), ctx.Err()
		}
	}
}

func (x *executor) release(nodes []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, n := range nodes {
		x.impaired[n]--
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// apply carries out one event and heals it.
func (x *executor) apply(ctx context.Context, e nemesis.Event) Executed {
	rec := Executed{Event: e, Start: x.since(), Target: e.Node}
	var err error
	switch e.Kind {
	case nemesis.Kill:
		err = x.kill(ctx, e, &rec)
	case nemesis.Pause:
		err = x.pause(ctx, e, &rec)
	case nemesis.Isolate, nemesis.Partition, nemesis.Delay, nemesis.Drop:
		err = x.network(ctx, e, &rec)
	case nemesis.DiskEIO, nemesis.DiskFull, nemesis.DiskSlow:
		err = x.disk(ctx, e, &rec)
	case nemesis.BitRot:
		err = x.bitrot(e, &rec)
	default:
		err = fmt.Errorf("unknown fault %s", e.Kind)
	}
	if err != nil && rec.Skipped == "" {
		rec.Err = err.Error()
	}
	switch {
	case e.Kind == nemesis.Partition:
		rec.Affected = x.r.minority(e.Sides)
	case e.Kind == nemesis.BitRot:
	case rec.Target != "":
		rec.Affected = []string{rec.Target}
	}
	return rec
}

// resolve names the node an event targets. A role may be vacant for a
// moment (an election after the last fault): it is asked again for up to
// roleWait.
const roleWait = 20 * time.Second

func (x *executor) resolve(ctx context.Context, e nemesis.Event) (string, error) {
	var find func(context.Context) (string, error)
	switch e.Role {
	case "":
		return e.Node, nil
	case nemesis.RoleEtcdLeader:
		find = x.r.etcdLeader
	case nemesis.RoleCuratorMaster:
		find = x.r.curatorMaster
	default:
		return "", fmt.Errorf("unknown role %q", e.Role)
	}
	deadline := time.Now().Add(roleWait)
	for {
		n, err := find(ctx)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return n, err
		}
		sleep(ctx, 500*time.Millisecond)
	}
}

func (x *executor) kill(ctx context.Context, e nemesis.Event, rec *Executed) error {
	target, err := x.resolve(ctx, e)
	if err != nil {
		rec.Skipped = "cannot resolve " + e.Role + ": " + err.Error()
		return err
	}
	rec.Target = target
	waited, err := x.reserve(ctx, []string{target})
	rec.Waited = waited.Seconds()
	if err != nil {
		rec.Skipped = err.Error()
		return err
	}
	defer x.release([]string{target})
	rec.Start = x.since()
	n := x.r.node(target)
	x.mu.Lock()
	x.down[target] = true
	x.mu.Unlock()
	x.r.cluster.Kill(n)
	sleep(ctx, e.Duration)
	rec.Healed = x.since()
	err = x.restart(n)
	rec.Ready = x.since()
	return err
}

// killRestart kills a node and starts it again.
func (x *executor) killRestart(n *devcluster.Node) error {
	x.mu.Lock()
	x.down[n.ID] = true
	x.mu.Unlock()
	x.r.cluster.Kill(n)
	return x.restart(n)
}

// restart starts a killed node again and waits until it serves.
func (x *executor) restart(n *devcluster.Node) error {
	x.mu.Lock()
	if x.restarting[n.ID] {
		// Someone else is restarting it (the crash watcher, the final
		// heal): wait for them.
		x.mu.Unlock()
		for {
			time.Sleep(200 * time.Millisecond)
			x.mu.Lock()
			busy := x.restarting[n.ID]
			x.mu.Unlock()
			if !busy {
				return nil
			}
		}
	}
	x.restarting[n.ID] = true
	x.down[n.ID] = true
	x.paused[n.ID] = false
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.restarting[n.ID] = false
		x.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	if n.PID() != 0 {
		// Already running again (another event restarted it): never start
		// a second process for a node.
		err = x.r.cluster.WaitReady(ctx, n)
	} else {
		err = x.r.cluster.Restart(ctx, n)
	}
	if err != nil {
		// A node that cannot start again is a finding in itself.
		x.r.finding("restart", "%s did not start again: %v", n.ID, err)
		x.r.cluster.Kill(n)
		if err2 := x.r.cluster.Restart(ctx, n); err2 != nil {
			return fmt.Errorf("restart %s: %w", n.ID, err)
		}
	}
	x.mu.Lock()
	x.down[n.ID] = false
	x.mu.Unlock()
	return nil
}

func (x *executor) pause(ctx context.Context, e nemesis.Event, rec *Executed) error {
	waited, err := x.reserve(ctx, []string{e.Node})
	rec.Waited = waited.Seconds()
	if err != nil {
		rec.Skipped = err.Error()
		return err
	}
	defer x.release([]string{e.Node})
	rec.Start = x.since()
	n := x.r.node(e.Node)
	pid := n.PID()
	if pid == 0 {
		rec.Skipped = "not running"
		return nil
	}
	x.mu.Lock()
	x.paused[e.Node] = true
	x.mu.Unlock()
	syscall.Kill(pid, syscall.SIGSTOP)
	sleep(ctx, e.Duration)
	syscall.Kill(pid, syscall.SIGCONT)
	x.mu.Lock()
	x.paused[e.Node] = false
	x.mu.Unlock()
	rec.Healed = x.since()
	wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = x.r.cluster.WaitReady(wctx, n)
	rec.Ready = x.since()
	return err
}

// network applies a link fault for the event's duration.
func (x *executor) network(ctx context.Context, e nemesis.Event, rec *Executed) error {
	var links map[proxy.Link]proxy.Fault
	var impaired []string
	mode := proxy.Fault{Cut: e.Mode == "cut", Blackhole: e.Mode == "blackhole"}
	switch e.Kind {
	case nemesis.Isolate:
		links = x.r.topo.nodeLinks(e.Node, mode)
		impaired = []string{e.Node}
	case nemesis.Partition:
		links = crossLinks(e.Sides, mode)
		impaired = x.r.minority(e.Sides)
		rec.Target = strings.Join(e.Sides[0], ",") + "|" + strings.Join(e.Sides[1], ",")
	case nemesis.Delay:
		links = x.r.topo.nodeLinks(e.Node, proxy.Fault{Delay: e.Delay})
	case nemesis.Drop:
		links = x.r.topo.nodeLinks(e.Node, proxy.Fault{DropRate: e.DropRate})
	}
	waited, err := x.reserve(ctx, impaired)
	rec.Waited = waited.Seconds()
	if err != nil {
		rec.Skipped = err.Error()
		return err
	}
	defer x.release(impaired)
	rec.Start = x.since()
	x.setNet(e.Seq, links)
	sleep(ctx, e.Duration)
	x.setNet(e.Seq, nil)
	rec.Healed = x.since()
	if len(impaired) > 0 {
		// Count the nodes impaired until they have had time to reconnect
		// (etcd leases, raft, gRPC back-off).
		sleep(ctx, 2*time.Second)
	}
	rec.Ready = x.since()
	return nil
}

// setNet records (nil: removes) one event's link faults and applies the
// combination of all in force to the proxies.
func (x *executor) setNet(seq int, links map[proxy.Link]proxy.Fault) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if links == nil {
		delete(x.netFaults, seq)
	} else {
		x.netFaults[seq] = links
	}
	var all []map[proxy.Link]proxy.Fault
	for _, m := range x.netFaults {
		all = append(all, m)
	}
	want := combine(all)
	for l, f := range want {
		if x.applied[l] != f {
			x.r.topo.net.Set(l, f)
		}
	}
	for l := range x.applied {
		if _, ok := want[l]; !ok {
			x.r.topo.net.Set(l, proxy.Fault{})
		}
	}
	x.applied = want
}

// disk injects a device fault through the node's admin API (the
// --fault-injection test endpoint) and clears it; a device an EIO failed
// is "replaced": its node restarts.
func (x *executor) disk(ctx context.Context, e nemesis.Event, rec *Executed) error {
	var impaired []string
	q := url.Values{"device": {e.Node + "/" + e.Device}}
	switch e.Kind {
	case nemesis.DiskEIO:
		impaired = []string{e.Node}
		if e.Mode == "read" {
			q.Set("read_err", "1")
		} else {
			q.Set("write_err", "1")
		}
	case nemesis.DiskFull:
		q.Set("full", "true")
	case nemesis.DiskSlow:
		q.Set("latency", e.Latency.String())
	}
	waited, err := x.reserve(ctx, impaired)
	rec.Waited = waited.Seconds()
	if err != nil {
		rec.Skipped = err.Error()
		return err
	}
	defer x.release(impaired)
	x.mu.Lock()
	down := x.down[e.Node] || x.paused[e.Node]
	x.mu.Unlock()
	if down {
		rec.Skipped = "node down"
		return nil
	}
	rec.Start = x.since()
	n := x.r.node(e.Node)
	pid := n.PID()
	if err := x.r.admin(ctx, n, "POST", "/v1/debug/fault?"+q.Encode(), nil); err != nil {
		rec.Skipped = "inject: " + err.Error()
		return nil
	}
	sleep(ctx, e.Duration)
	rec.Healed = x.since()
	if n.PID() != pid {
		// The process that had the fault is gone (the fault lived in its
		// memory): nothing to clear.
		rec.Detail = "node restarted meanwhile"
		rec.Ready = x.since()
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st []struct {
		Device string `json:"device"`
		Failed bool   `json:"failed"`
	}
	err = x.r.admin(cctx, n, "POST", "/v1/debug/fault?device="+url.QueryEscape(e.Node+"/"+e.Device), nil)
	if err == nil {
		err = x.r.admin(cctx, n, "GET", "/v1/debug/fault", &st)
	}
	failed := false
	for _, d := range st {
		failed = failed || d.Failed
	}
	if err != nil || failed {
		// The device failed (or the node stopped answering): replace the
		// disk, as an operator would, by restarting the node.
		rec.Detail = "device failed; node restarted"
		if err != nil {
			rec.Detail = "clearing failed (" + err.Error() + "); node restarted"
		}
		if err := x.killRestart(n); err != nil {
			return err
		}
	}
	rec.Ready = x.since()
	return nil
}

// bitrot flips one bit of one egroup replica file on the node's devices,
// never in an egroup corrupted before (any=3 data stays recoverable).
func (x *executor) bitrot(e nemesis.Event, rec *Executed) error {
	type file struct {
		path, device string
		id           uint64
		size         int64
	}
	var files []file
	for _, dev := range x.r.deviceNames {
		root := filepath.Join(x.r.node(e.Node).Dir, dev, "eg")
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".eg") {
				return nil
			}
			id, perr := strconv.ParseUint(strings.TrimSuffix(filepath.Base(p), ".eg"), 16, 64)
			info, ierr := d.Info()
			if perr != nil || ierr != nil || info.Size() == 0 {
				return nil
			}
			files = append(files, file{path: p, device: dev, id: id, size: info.Size()})
			return nil
		})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	x.mu.Lock()
	defer x.mu.Unlock()
	var eligible []file
	for _, f := range files {
		if !x.rotted[f.id] {
			eligible = append(eligible, f)
		}
	}
	if len(eligible) == 0 {
		rec.Skipped = "no egroup file to corrupt"
		return nil
	}
	f := eligible[e.Pick%uint64(len(eligible))]
	off := int64((e.Pick >> 20) % uint64(f.size))
	fh, err := os.OpenFile(f.path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer fh.Close()
	b := make([]byte, 1)
	if _, err := fh.ReadAt(b, off); err != nil {
		return err
	}
	r := rot{Egroup: f.id, Node: e.Node, Device: f.device, Path: f.path, Offset: off, Old: b[0], New: b[0] ^ byte(1<<(e.Pick>>8%8))}
	if _, err := fh.WriteAt([]byte{r.New}, off); err != nil {
		return err
	}
	x.rotted[f.id] = true
	x.rots = append(x.rots, r)
	rec.Detail = fmt.Sprintf("egroup %016x on %s/%s, byte %d: %#02x→%#02x", f.id, e.Node, f.device, off, r.Old, r.New)
	return nil
}

// healAll lifts every fault: network, pauses, dead nodes, device faults,
// failed devices. The schedule's own heals have run; this is the safety
// net (and catches nodes that died on their own).
func (x *executor) healAll(ctx context.Context) error {
	x.mu.Lock()
	x.netFaults = map[int]map[proxy.Link]proxy.Fault{}
	x.applied = map[proxy.Link]proxy.Fault{}
	x.mu.Unlock()
	x.r.topo.net.Heal()
	for _, n := range x.r.cluster.Nodes {
		if pid := n.PID(); pid != 0 {
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	for _, n := range x.r.cluster.Nodes {
		if n.PID() == 0 {
			if err := x.restart(n); err != nil {
				return err
			}
		}
	}
	for _, n := range x.r.cluster.Nodes {
		var st []struct {
			Device string `json:"device"`
			Failed bool   `json:"failed"`
		}
		if err := x.r.admin(ctx, n, "GET", "/v1/debug/fault", &st); err != nil {
			return fmt.Errorf("heal %s: %w", n.ID, err)
		}
		failed := false
		for _, d := range st {
			if err := x.r.admin(ctx, n, "POST", "/v1/debug/fault?device="+url.QueryEscape(d.Device), nil); err != nil {
				return fmt.Errorf("heal %s: %w", n.ID, err)
			}
			failed = failed || d.Failed
		}
		if failed {
			if err := x.killRestart(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchCrashes restarts nodes that exit without being killed by us: a
// crash is a finding.
func (x *executor) watchCrashes(ctx context.Context) {
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, n := range x.r.cluster.Nodes {
			x.mu.Lock()
			expected := x.down[n.ID]
			x.mu.Unlock()
			if expected || n.PID() != 0 {
				continue
			}
			x.r.finding("crash", "%s exited on its own; log tail: %s", n.ID, tail(n.LogPath, 3))
			x.mu.Lock()
			x.crashes = append(x.crashes, n.ID)
			x.down[n.ID] = true // until restarted
			x.mu.Unlock()
			go x.restart(n)
		}
	}
}

// tail returns the last lines of a file, joined.
func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, " | ")
}

// writeExecuted writes one JSON line per executed event.
func writeExecuted(path string, recs []Executed) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
