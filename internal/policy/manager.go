package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terrace-storage/terrace/internal/meta"
	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/policy/sandbox"
)

// Options configure a Manager. Zero values mean defaults.
type Options struct {
	// Node names this node in events and logs.
	Node   string
	Logger *slog.Logger
	// DisableAfter is how many consecutive failures (errors, timeouts,
	// budget overruns, wrong result types) disable a version on this
	// node; its hook then runs the last good version or the built-in
	// default until a new version is put. 3 tolerates a one-off bad input
	// without letting a broken policy be retried on every decision.
	DisableAfter int
	// ResyncEvery re-reads the registry even without watch events, a
	// safety net for events a watch dropped. 30 s.
	ResyncEvery time.Duration
	// SwapLogSize bounds the recent swaps kept for `terrace bench policy`.
	SwapLogSize int
	// LimitsFor overrides the sandbox limits of a hook (tests); nil uses
	// Hook.Limits.
	LimitsFor func(Hook) sandbox.Limits
}

// EnsureDefaults fills zero fields.
func (o *Options) EnsureDefaults() {
	if o.Node == "" {
		o.Node = "n1"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.DisableAfter == 0 {
		o.DisableAfter = 3
	}
	if o.ResyncEvery == 0 {
		o.ResyncEvery = 30 * time.Second
	}
	if o.SwapLogSize == 0 {
		o.SwapLogSize = 4096
	}
	if o.LimitsFor == nil {
		o.LimitsFor = Hook.Limits
	}
}

// Version is one compiled, loaded version of a policy on this node.
type Version struct {
	Record
	prog      *sandbox.Program
	functions []string
	values    []string
	params    map[string]any
	scope     RuleScope
	selection placement.Selection
	loadedAt  time.Time

	failures atomic.Int32 // consecutive
	calls    atomic.Int64
	errs     atomic.Int64
	ok       atomic.Bool // succeeded at least once here
	disabled atomic.Bool
	lastErr  atomic.Pointer[string]
	lastLog  atomic.Int64 // unix nanos of the last failure logged
}

// Functions are the global functions the version defines.
func (v *Version) Functions() []string { return v.functions }

// slot holds the versions of one policy name.
type slot struct {
	name string
	hook Hook
	// cur is the newest installed version (possibly disabled); good is
	// the newest older version that succeeded here: what decides when cur
	// fails. In-flight calls keep the Version they loaded: a swap never
	// changes a decision half-way.
	cur  atomic.Pointer[Version]
	good atomic.Pointer[Version]
}

// candidates are the versions to try, in order.
func (s *slot) candidates() []*Version {
	var out []*Version
	cur, good := s.cur.Load(), s.good.Load()
	if cur != nil && !cur.disabled.Load() {
		out = append(out, cur)
	}
	if good != nil && good != cur && !good.disabled.Load() {
		out = append(out, good)
	}
	return out
}

// Swap records one version going live on this node.
type Swap struct {
	Name    string        `json:"name"`
	Hook    Hook          `json:"hook"`
	Version int64         `json:"version"`
	Deleted bool          `json:"deleted,omitempty"`
	Commit  time.Time     `json:"commit"` // the record's commit time (proposer's clock)
	Swapped time.Time     `json:"swapped"`
	Load    time.Duration `json:"load_ns"` // compile and load time
	Error   string        `json:"error,omitempty"`
}

// Manager keeps every node's view of the registry live: it loads all
// policies at start, watches the registry, compiles each new version and
// swaps it in atomically, and runs hook calls with fallback to the last
// good version or the built-in default.
type Manager struct {
	reg  *Registry
	kv   meta.KV
	opts Options
	log  *slog.Logger
	m    *metrics

	mu     sync.RWMutex
	byName map[string]*slot
	// gone is the tombstone version of removed policies, so that an older
	// record seen late cannot bring a removed policy back.
	gone map[string]int64
	// singles holds the slot of each singleton hook; the map's keys are
	// fixed at construction, so reads need no lock.
	singles map[Hook]*atomic.Pointer[slot]

	swapMu sync.Mutex
	swaps  []Swap
	swapN  int
}

// NewManager returns a manager over the registry in kv.
func NewManager(kv meta.KV, opts Options) *Manager {
	opts.EnsureDefaults()
	m := &Manager{reg: NewRegistry(kv, nil), kv: kv, opts: opts, log: opts.Logger.With("component", "policy"),
		byName: map[string]*slot{}, gone: map[string]int64{}, singles: map[Hook]*atomic.Pointer[slot]{}}
	for _, h := range Hooks {
		if h.Singleton() {
			m.singles[h] = &atomic.Pointer[slot]{}
		}
	}
	m.m = newMetrics(m)
	return m
}

// Registry returns the registry the manager watches.
func (m *Manager) Registry() *Registry { return m.reg }

// Start loads every policy and watches for changes until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	if err := m.resync(ctx); err != nil {
		return fmt.Errorf("policy: initial load: %w", err)
	}
	go m.watch(ctx)
	return nil
}

func (m *Manager) watch(ctx context.Context) {
	for ctx.Err() == nil {
		ch := m.kv.Watch(ctx, []byte(prefixCurrent))
		// Re-read after subscribing: a change committed between the last
		// read and the subscription would otherwise be missed. Versions
		// already installed are skipped, so repeats are harmless.
		if err := m.resync(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("policy registry resync failed", "err", err)
		}
		tick := time.NewTicker(m.opts.ResyncEvery)
	events:
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					break events
				}
				m.apply(ev)
			case <-tick.C:
				if err := m.resync(ctx); err != nil && ctx.Err() == nil {
					m.log.Warn("policy registry resync failed", "err", err)
				}
			case <-ctx.Done():
				tick.Stop()
				return
			}
		}
		tick.Stop()
		select { // the watch ended (store restarted, receiver lagged): re-watch
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (m *Manager) apply(ev meta.Event) {
	if ev.Type == meta.EventDelete {
		return // records are never deleted, only tombstoned
	}
	var rec Record
	if err := meta.Decode(ev.Item.Value, &rec); err != nil {
		m.log.Error("policy: undecodable registry record", "key", string(ev.Item.Key), "err", err)
		return
	}
	m.install(rec)
}

func (m *Manager) resync(ctx context.Context) error {
	recs, err := m.reg.List(ctx)
	if err != nil {
		return err
	}
	for _, rec := range recs {
		m.install(rec)
	}
	m.reconcileSingles()
	return nil
}

// load compiles and loads a record into a Version.
func (m *Manager) load(ctx context.Context, rec Record) (*Version, error) {
	lim := m.opts.LimitsFor(rec.Hook)
	prog, err := sandbox.Compile(rec.Name+".lua", rec.Source, lim)
	if err != nil {
		return nil, err
	}
	fns, vals, err := prog.Describe(ctx)
	if err != nil {
		return nil, err
	}
	if err := rec.Hook.checkFunctions(fns); err != nil {
		return nil, &sandbox.Error{Kind: sandbox.KindMissing, Policy: rec.Name, Msg: err.Error()}
	}
	v := &Version{Record: rec, prog: prog, functions: fns, values: vals, loadedAt: time.Now()}
	if err := v.readSettings(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// readSettings reads the optional globals `params`, `scope` (rules) and
// `selection` (fitness) once at load.
func (v *Version) readSettings(ctx context.Context) error {
	return v.prog.Run(ctx, sandbox.RunOptions{}, func(s *sandbox.Session) error {
		p, err := s.Global("params")
		if err != nil {
			return err
		}
		switch pv := p.(type) {
		case nil:
		case map[string]any:
			v.params = pv
		default:
			return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("params must be a table with named fields, got %T", p)}
		}
		if v.Hook == HookRule {
			sc, err := s.Global("scope")
			if err != nil {
				return err
			}
			scope, err := parseScope(sc)
			if err != nil {
				return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: err.Error()}
			}
			v.scope = scope
		}
		if v.Hook == HookFitness {
			sel, _ := v.params["selection"].(string)
			if sel != "" {
				v.selection = placement.Selection(sel)
				ok := false
				for _, x := range placement.Selections {
					ok = ok || x == v.selection
				}
				if !ok {
					return &sandbox.Error{Kind: sandbox.KindType, Policy: v.Name, Msg: fmt.Sprintf("params.selection %q: want sus, truncation, two-choice or uniform", sel)}
				}
			}
		}
		return nil
	})
}

// install makes rec live on this node if it is newer than what runs.
func (m *Manager) install(rec Record) {
	m.mu.RLock()
	sl := m.byName[rec.Name]
	gone := m.gone[rec.Name]
	m.mu.RUnlock()
	if rec.Version <= gone {
		return
	}
	if sl != nil {
		if cur := sl.cur.Load(); cur != nil && cur.Version >= rec.Version {
			return
		}
	}
	start := time.Now()
	sw := Swap{Name: rec.Name, Hook: rec.Hook, Version: rec.Version, Deleted: rec.Deleted, Commit: rec.Time}
	var v *Version
	if !rec.Deleted {
		var err error
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		v, err = m.load(ctx, rec)
		cancel()
		if err != nil {
			// Validated at put, so this means a different build or
			// limits. Keep what runs; report it cluster-wide.
			sw.Error = err.Error()
			sw.Swapped = time.Now()
			m.recordSwap(sw)
			m.log.Error("policy version failed to load; keeping the previous one", "policy", rec.Name, "version", rec.Version, "err", err)
			m.report(rec.Name, rec.Hook, rec.Version, "load-failed", err.Error())
			return
		}
	}
	m.mu.Lock()
	sl = m.byName[rec.Name]
	if sl != nil {
		if cur := sl.cur.Load(); cur != nil && cur.Version >= rec.Version {
			m.mu.Unlock()
			return // a concurrent install got here first
		}
	}
	if rec.Version <= m.gone[rec.Name] {
		m.mu.Unlock()
		return
	}
	if rec.Deleted {
		m.gone[rec.Name] = rec.Version
		if sl != nil {
			delete(m.byName, rec.Name)
			m.unsetSingle(sl)
		}
	} else {
		delete(m.gone, rec.Name)
		if sl == nil || sl.hook != rec.Hook {
			if sl != nil {
				// The name moved to another hook (removed and put again
				// while this node missed the tombstone): the old hook
				// must not keep running the old slot.
				m.unsetSingle(sl)
			}
			sl = &slot{name: rec.Name, hook: rec.Hook}
			m.byName[rec.Name] = sl
		}
		if prev := sl.cur.Load(); prev != nil && prev.ok.Load() && !prev.disabled.Load() {
			sl.good.Store(prev)
		}
		sl.cur.Store(v)
		if ptr := m.singles[rec.Hook]; ptr != nil {
			ptr.Store(sl)
		}
	}
	m.mu.Unlock()
	sw.Swapped = time.Now()
	sw.Load = sw.Swapped.Sub(start)
	m.recordSwap(sw)
	m.m.swaps.WithLabelValues(string(rec.Hook)).Inc()
	if !rec.Time.IsZero() {
		m.m.swapDelay.Observe(sw.Swapped.Sub(rec.Time).Seconds())
	}
	m.log.Info("policy version live", "policy", rec.Name, "hook", rec.Hook, "version", rec.Version, "deleted", rec.Deleted,
		"load", sw.Load.Round(time.Microsecond), "since_commit", sw.Swapped.Sub(rec.Time).Round(time.Microsecond))
}

func (m *Manager) recordSwap(s Swap) {
	m.swapMu.Lock()
	defer m.swapMu.Unlock()
	if len(m.swaps) < m.opts.SwapLogSize {
		m.swaps = append(m.swaps, s)
	} else {
		m.swaps[m.swapN%m.opts.SwapLogSize] = s
	}
	m.swapN++
}

// Swaps returns the recent swaps on this node, oldest first, optionally
// only those of one policy.
func (m *Manager) Swaps(name string) []Swap {
	m.swapMu.Lock()
	defer m.swapMu.Unlock()
	out := make([]Swap, 0, len(m.swaps))
	start := 0
	if len(m.swaps) == m.opts.SwapLogSize {
		start = m.swapN % m.opts.SwapLogSize
	}
	for i := 0; i < len(m.swaps); i++ {
		s := m.swaps[(start+i)%len(m.swaps)]
		if name == "" || s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// unsetSingle clears sl's singleton hook if sl still fills it. Callers
// hold m.mu.
func (m *Manager) unsetSingle(sl *slot) {
	if ptr := m.singles[sl.hook]; ptr != nil && ptr.Load() == sl {
		ptr.Store(nil)
	}
}

// reconcileSingles makes every singleton hook point at the slot the
// installed registry records give it: a slot no longer installed under
// its name, or now under another hook, is cleared, and an empty hook
// with exactly one installed policy gets it. Installs keep this true;
// resync checks it again so a path that missed an update (a watch gap)
// cannot leave a removed policy running.
func (m *Manager) reconcileSingles() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, ptr := range m.singles {
		if sl := ptr.Load(); sl != nil && (m.byName[sl.name] != sl || sl.hook != h) {
			m.log.Warn("policy: singleton hook pointed at a policy no longer installed for it; cleared", "hook", h, "policy", sl.name)
			ptr.Store(nil)
		}
		if ptr.Load() != nil {
			continue
		}
		var only *slot
		n := 0
		for _, sl := range m.byName {
			if sl.hook == h && sl.cur.Load() != nil {
				only, n = sl, n+1
			}
		}
		if n == 1 {
			ptr.Store(only)
		}
	}
}

// single returns the slot filling a singleton hook, or nil.
func (m *Manager) single(h Hook) *slot { return m.singles[h].Load() }

// named returns a policy's slot, or nil.
func (m *Manager) named(name string) *slot {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.byName[name]
}

// errNoVersion means a hook has no usable version: use the default.
var errNoVersion = errors.New("policy: no usable version")

// call runs fn against the slot's versions in order — the current one
// unless disabled, then the last good one — until one succeeds, and
// returns the version that did. When all fail the caller applies the
// built-in default; the error says why.
func (m *Manager) call(sl *slot, fn func(v *Version) error) (*Version, error) {
	if sl == nil {
		return nil, errNoVersion
	}
	lastErr := errNoVersion
	for i, v := range sl.candidates() {
		start := time.Now()
		err := fn(v)
		m.m.callSeconds.WithLabelValues(string(sl.hook)).Observe(time.Since(start).Seconds())
		v.calls.Add(1)
		if err == nil {
			m.succeeded(sl, v)
			if i > 0 {
				m.m.fallbacks.WithLabelValues(string(sl.hook), "last-good").Inc()
			}
			return v, nil
		}
		m.failed(sl, v, err)
		lastErr = err
	}
	m.m.fallbacks.WithLabelValues(string(sl.hook), "default").Inc()
	return nil, lastErr
}

func (m *Manager) succeeded(_ *slot, v *Version) {
	v.failures.Store(0)
	if !v.ok.Load() {
		v.ok.Store(true)
	}
}

// failed counts a failure and disables the version after DisableAfter in
// a row. A canceled caller is not the policy's fault and is not counted.
func (m *Manager) failed(sl *slot, v *Version, err error) {
	kind := sandbox.KindOf(err)
	if kind == sandbox.KindCanceled {
		return
	}
	if kind == "" {
		kind = "error"
	}
	v.errs.Add(1)
	msg := err.Error()
	v.lastErr.Store(&msg)
	m.m.errors.WithLabelValues(string(sl.hook), sl.name, string(kind)).Inc()
	var se *sandbox.Error
	if errors.As(err, &se) && se.Starved {
		// The node was too busy to run the policy in time: fall back for
		// this decision, but do not count towards disabling it.
		return
	}
	n := v.failures.Add(1)
	now := time.Now().UnixNano()
	if last := v.lastLog.Load(); now-last > int64(10*time.Second) && v.lastLog.CompareAndSwap(last, now) {
		m.log.Warn("policy call failed; falling back", "policy", sl.name, "hook", sl.hook, "version", v.Version, "kind", kind, "err", err)
	}
	if int(n) >= m.opts.DisableAfter && v.disabled.CompareAndSwap(false, true) {
		if sl.good.Load() == v {
			sl.good.Store(nil)
		}
		m.log.Error("policy version disabled on this node after repeated failures", "policy", sl.name, "hook", sl.hook,
			"version", v.Version, "failures", n, "err", err)
		m.report(sl.name, sl.hook, v.Version, "disabled", fmt.Sprintf("%d failures in a row; last: %v", n, err))
	}
}

// report writes an event to the cluster-wide log without blocking the
// caller (it may be on the write path).
func (m *Manager) report(name string, hook Hook, version int64, kind, msg string) {
	e := Event{Time: time.Now().UTC(), Node: m.opts.Node, Name: name, Hook: hook, Version: version, Kind: kind, Message: msg}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := m.reg.AddEvent(ctx, e); err != nil {
			m.log.Warn("policy event not recorded", "err", err)
		}
	}()
}

// Status is one policy's state on this node.
type Status struct {
	Name      string    `json:"name"`
	Hook      Hook      `json:"hook"`
	Version   int64     `json:"version"`
	Running   int64     `json:"running"` // version decisions use now; 0 = built-in default
	Disabled  bool      `json:"disabled,omitempty"`
	Author    string    `json:"author"`
	Committed time.Time `json:"committed"`
	LoadedAt  time.Time `json:"loaded_at"`
	Calls     int64     `json:"calls"`
	Errors    int64     `json:"errors"`
	LastError string    `json:"last_error,omitempty"`
	Functions []string  `json:"functions"`
}

// Status reports every live policy on this node, by name.
func (m *Manager) Status() []Status {
	m.mu.RLock()
	slots := make([]*slot, 0, len(m.byName))
	for _, sl := range m.byName {
		slots = append(slots, sl)
	}
	m.mu.RUnlock()
	out := make([]Status, 0, len(slots))
	for _, sl := range slots {
		cur := sl.cur.Load()
		if cur == nil {
			continue
		}
		st := Status{Name: sl.name, Hook: sl.hook, Version: cur.Version, Disabled: cur.disabled.Load(), Author: cur.Author,
			Committed: cur.Time, LoadedAt: cur.loadedAt, Calls: cur.calls.Load(), Errors: cur.errs.Load(), Functions: cur.functions}
		if c := sl.candidates(); len(c) > 0 {
			st.Running = c[0].Version
		}
		if e := cur.lastErr.Load(); e != nil {
			st.LastError = *e
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
