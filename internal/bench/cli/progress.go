package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/terrace-storage/terrace/internal/bench"
)

// progress draws a bar on stderr for the runner it is watching, by polling
// Runner.Status; the load generator itself knows nothing of the display. It
// is inert (every method a no-op) unless enabled, which the commands do only
// when stderr is a terminal and --quiet is not given.
type progress struct {
	w       io.Writer
	mu      sync.Mutex
	r       *bench.Runner
	label   string
	bar     *progressbar.ProgressBar
	phase   string
	stop    chan struct{}
	stopped chan struct{}
}

// stderrIsTerminal reports whether progress output would reach a person.
func stderrIsTerminal() bool { return term.IsTerminal(int(os.Stderr.Fd())) }

func newProgress(enabled bool, w io.Writer) *progress {
	if !enabled {
		return nil
	}
	p := &progress{w: w, stop: make(chan struct{}), stopped: make(chan struct{})}
	go p.loop()
	return p
}

// watch switches the display to r, labelled (e.g. "round 2/3 terrace").
func (p *progress) watch(label string, r *bench.Runner) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.r, p.label = r, label
	p.clearBar()
}

// close removes the bar and stops polling.
func (p *progress) close() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.stopped
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clearBar()
}

func (p *progress) clearBar() {
	if p.bar != nil {
		_ = p.bar.Clear()
		p.bar = nil
		p.phase = ""
	}
}

func (p *progress) loop() {
	defer close(p.stopped)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			p.update()
		}
	}
}

func (p *progress) update() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.r == nil {
		return
	}
	st := p.r.Status()
	if st.Phase == bench.PhaseIdle {
		p.clearBar()
		return
	}
	if st.Phase != p.phase {
		p.clearBar()
		max := int64(-1) // spinner: length unknown
		switch {
		case st.Total > 0:
			max = st.Total
		case st.Duration > 0:
			max = st.Duration.Milliseconds()
		}
		p.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetWidth(30),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionThrottle(100*time.Millisecond),
		)
		p.phase = st.Phase
	}
	switch {
	case st.Total > 0:
		_ = p.bar.Set64(min(st.Done, st.Total))
	case st.Duration > 0:
		_ = p.bar.Set64(min(st.Elapsed.Milliseconds(), st.Duration.Milliseconds()))
	default:
		_ = p.bar.Add64(1)
	}
	rate := 0.0
	if s := st.Elapsed.Seconds(); s > 0 {
		rate = float64(st.Done) / s
	}
	desc := fmt.Sprintf("%s %s: %d ops, %.0f/s", p.label, st.Phase, st.Done, rate)
	if st.Errors > 0 {
		desc += fmt.Sprintf(", %d errors", st.Errors)
	}
	p.bar.Describe(desc)
}
