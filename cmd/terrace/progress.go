package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/terrace-storage/terrace/internal/actuate"
	"github.com/terrace-storage/terrace/internal/object"
	"github.com/terrace-storage/terrace/internal/server"
)

// Progress of long CLI work (curator run --wait, tier recall, object
// set-replication --wait, node drain --wait). On a terminal it is a bar
// (schollz/progressbar, already used by `terrace bench`) with bytes done,
// rate and ETA; when stdout is not a terminal (a log, a pipe, CI) it is a
// plain line every few seconds. It always goes to stderr, so stdout keeps
// only the command's result (and --json stays parseable).

// progressEvery is how often plain-line progress is printed.
const progressEvery = 3 * time.Second

type progress struct {
	w      io.Writer
	tty    bool
	quiet  bool
	label  string
	start  time.Time
	mu     sync.Mutex
	bar    *progressbar.ProgressBar
	total  int64 // of the current bar; -1 for a spinner
	unit   string
	last   time.Time
	lastTx string
	every  time.Duration // between plain lines; default progressEvery
	poll   time.Duration // how often watchers ask the node; default 500ms
}

// newProgress returns a progress display for label; quiet (--json)
// prints nothing.
func newProgress(label string, quiet bool) *progress {
	tty := term.IsTerminal(int(os.Stdout.Fd())) && term.IsTerminal(int(os.Stderr.Fd()))
	return &progress{w: os.Stderr, tty: tty, quiet: quiet, label: label, start: time.Now(), total: -2, every: progressEvery}
}

// spin shows activity of unknown length (e.g. "scanning metadata").
func (p *progress) spin(what string) {
	if p == nil || p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.ensureBar(-1, "")
		p.bar.Describe(p.label + ": " + what)
		_ = p.bar.Add(1)
		return
	}
	p.line(fmt.Sprintf("%s: %s (%s)", p.label, what, time.Since(p.start).Round(time.Second)))
}

// set shows done of total in unit ("bytes" renders sizes and rates).
func (p *progress) set(done, total int64, unit, detail string) {
	p.setRate(done, total, unit, detail, 0, 0)
}

// setRate is set with the rate and ETA the node measured (0: computed
// here from the time since the display started).
func (p *progress) setRate(done, total int64, unit, detail string, rate float64, eta time.Duration) {
	if p == nil || p.quiet {
		return
	}
	if total <= 0 {
		p.spin(detail)
		return
	}
	done = min(max(done, 0), total)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		p.ensureBar(total, unit)
		p.bar.Describe(p.label + ": " + detail)
		_ = p.bar.Set64(done)
		return
	}
	if elapsed := time.Since(p.start).Seconds(); rate <= 0 && elapsed > 0 && done > 0 {
		rate = float64(done) / elapsed
		eta = time.Duration(float64(total-done) / rate * float64(time.Second))
	}
	rateTx, etaTx := "", ""
	if rate > 0 {
		if unit == "bytes" {
			rateTx = ", " + humanBytes(int64(rate)) + "/s"
		} else {
			rateTx = fmt.Sprintf(", %.1f %s/s", rate, unit)
		}
		etaTx = ", ETA " + eta.Round(time.Second).String()
	}
	amount := fmt.Sprintf("%d/%d %s", done, total, unit)
	if unit == "bytes" {
		amount = humanBytes(done) + " / " + humanBytes(total)
	}
	p.line(fmt.Sprintf("%s: %s (%.0f%%)%s%s; %s", p.label, amount, 100*float64(done)/float64(total), rateTx, etaTx, detail))
}

// line prints a plain progress line at most every progressEvery (and
// never the same line twice in a row).
func (p *progress) line(s string) {
	if s == p.lastTx || (!p.last.IsZero() && time.Since(p.last) < p.every) {
		return
	}
	p.last, p.lastTx = time.Now(), s
	fmt.Fprintln(p.w, s)
}

func (p *progress) ensureBar(total int64, unit string) {
	if p.bar != nil && p.total == total && p.unit == unit {
		return
	}
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(p.w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSpinnerType(14),
		progressbar.OptionSetPredictTime(total > 0),
		progressbar.OptionShowElapsedTimeOnFinish(),
	}
	if unit == "bytes" {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowTotalBytes(true), progressbar.OptionUseIECUnits(true))
	} else if total > 0 {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit))
	}
	p.bar = progressbar.NewOptions64(total, opts...)
	p.total, p.unit = total, unit
}

// done removes the bar; the command prints its result next.
func (p *progress) done() {
	if p == nil || p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
	}
	if !p.tty && !p.last.IsZero() {
		fmt.Fprintf(p.w, "%s: finished after %s\n", p.label, time.Since(p.start).Round(100*time.Millisecond))
	}
}

// showJob renders a Curator job's progress: bytes moved when the job
// moves data, else tasks done.
func (p *progress) showJob(j actuate.Progress) {
	pending := j.States[actuate.Pending.String()]
	detail := fmt.Sprintf("%d/%d tasks", j.Tasks-pending, j.Tasks)
	if j.BytesTotal > 0 {
		p.setRate(j.BytesDone, j.BytesTotal, "bytes", detail+" ("+j.Kind+" job)", j.Rate, j.ETA)
		return
	}
	p.set(int64(j.Tasks-pending), int64(j.Tasks), "tasks", j.Kind+" job")
}

// watchJobs polls the node's running jobs while call runs and shows the
// first job of kind that was not running or recent before: the one call
// started. It returns call's error.
func watchJobs(c *apiClient, p *progress, kind string, call func() error) error {
	if p == nil || p.quiet {
		return call()
	}
	before := map[string]bool{}
	var jl server.JobList
	if err := c.getJSON("/v1/curator/jobs", url.Values{"n": {"50"}}, &jl); err == nil {
		for _, j := range append(jl.Running, jl.Recent...) {
			before[j.ID] = true
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- call() }()
	seen := false // our job has appeared (its tasks may finish before the call returns)
	tick := time.NewTicker(cmp.Or(p.poll, 500*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case err := <-errc:
			p.done()
			return err
		case <-tick.C:
		}
		var cur server.JobList
		if err := c.getJSON("/v1/curator/jobs", url.Values{"n": {"1"}}, &cur); err != nil {
			p.spin("waiting for the node")
			continue
		}
		shown := false
		for _, j := range cur.Running {
			if !before[j.ID] && j.Kind == kind {
				p.showJob(j)
				shown, seen = true, true
				break
			}
		}
		switch {
		case shown:
		case seen:
			p.spin("tasks done; scrubbing and recording the job")
		default:
			p.spin("scanning metadata")
		}
	}
}

// spinWhile wraps a blocking set-replication call: the node rewrites the
// object in one request and reports no byte count while it does, so the
// display is the object's size and the time taken (an honest spinner,
// not an invented percentage).
func spinWhile(c *apiClient, p *progress, bucket, key, vector string, call func() error) func() error {
	return func() error {
		if p == nil || p.quiet {
			return call()
		}
		what := "rewriting into " + vector
		var loc struct {
			Size int64 `json:"size"`
		}
		if err := c.getJSON("/v1/object/locate", url.Values{"bucket": {bucket}, "key": {key}}, &loc); err == nil {
			what = "rewriting " + humanBytes(loc.Size) + " into " + vector
		}
		errc := make(chan error, 1)
		go func() { errc <- call() }()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case err := <-errc:
				p.done()
				return err
			case <-tick.C:
				p.spin(what)
			}
		}
	}
}

// waitDrained polls the tier report until no device of node holds
// replica bytes, showing the bytes moved off it so far.
func waitDrained(ctx context.Context, c *apiClient, p *progress, node string) error {
	var initial int64 = -1
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		var rep object.TierReport
		if err := c.getJSON("/v1/tier/report", nil, &rep); err != nil {
			return err
		}
		var left int64
		egroups := 0
		found := false
		for _, d := range rep.Devices {
			if string(d.Node) == node {
				found = true
				left += d.EgroupBytes
				egroups += d.Egroups
			}
		}
		if !found {
			return fmt.Errorf("node %s has no devices in the tier report", node)
		}
		if initial < 0 {
			initial = left
		}
		if egroups == 0 {
			p.done()
			return nil
		}
		p.set(initial-left, initial, "bytes", fmt.Sprintf("%d egroups left on %s", egroups, node))
		select {
		case <-ctx.Done():
			p.done()
			return fmt.Errorf("stopped waiting; node %s is still draining (%s left)", node, humanBytes(left))
		case <-tick.C:
		}
	}
}
