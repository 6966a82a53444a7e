package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Link is the traffic from one node to another. From is "" when a proxy
// could not tell who is sending (see [Network.ListenHTTP]).
type Link struct{ From, To string }

func (l Link) String() string {
	from := l.From
	if from == "" {
		from = "?"
	}
	return from + "→" + l.To
}

// Fault is what a link does to its traffic. The zero Fault is a healthy
// link.
type Fault struct {
	// Cut resets new connections at once and closes open ones.
	Cut bool `json:"cut,omitempty"`
	// Blackhole accepts connections but holds every byte, in both
	// directions, until the fault is lifted.
	Blackhole bool `json:"blackhole,omitempty"`
	// DropRate is the probability (0..1) that a new connection is reset,
	// and that an open one is closed when the fault is set.
	DropRate float64 `json:"drop_rate,omitempty"`
	// Delay holds every chunk of bytes this long before forwarding it.
	Delay time.Duration `json:"delay,omitempty"`
}

// IsZero reports a healthy link.
func (f Fault) IsZero() bool { return f == Fault{} }

func (f Fault) String() string {
	switch {
	case f.IsZero():
		return "ok"
	case f.Cut:
		return "cut"
	case f.Blackhole:
		return "blackhole"
	}
	s := ""
	if f.DropRate > 0 {
		s += fmt.Sprintf("drop=%g", f.DropRate)
	}
	if f.Delay > 0 {
		if s != "" {
			s += ","
		}
		s += "delay=" + f.Delay.String()
	}
	return s
}

// Limits.
const (
	// chunkBytes is the most a pipe reads before forwarding.
	chunkBytes = 32 << 10
	// queuedChunks bounds the chunks a delayed pipe holds per direction
	// (4 MiB): a fast sender then waits, as on a full TCP window.
	queuedChunks = 128
	// maxHeaderBytes bounds what ListenHTTP reads to identify a sender.
	maxHeaderBytes = 64 << 10
	// identifyTimeout bounds the wait for the first request's headers.
	identifyTimeout = 10 * time.Second
)

// LinkStats counts what happened on a link.
type LinkStats struct {
	Accepted int64 `json:"accepted"`
	Reset    int64 `json:"reset"`  // connections refused or closed by a fault
	Bytes    int64 `json:"bytes"`  // forwarded, both directions
	Open     int   `json:"open"`   // connections open now
	Faulted  bool  `json:"faults"` // a fault is set now
}

// Network holds the fault table and the proxied connections.
type Network struct {
	mu      sync.Mutex
	faults  map[Link]Fault
	conns   map[Link]map[*pipe]struct{}
	stats   map[Link]*LinkStats
	rng     *rand.Rand
	proxies []*Proxy
	// changed is closed and replaced whenever a fault changes, waking
	// blackholed pipes.
	changed chan struct{}
}

// NewNetwork returns a healthy network; seed drives the drop decisions.
func NewNetwork(seed uint64) *Network {
	return &Network{faults: map[Link]Fault{}, conns: map[Link]map[*pipe]struct{}{},
		stats: map[Link]*LinkStats{}, rng: rand.New(rand.NewPCG(seed, 0x70726f7879)), changed: make(chan struct{})}
}

// Set replaces a link's fault. Cutting closes the link's open
// connections; a drop rate closes each with that probability.
func (n *Network) Set(l Link, f Fault) {
	n.mu.Lock()
	if f.IsZero() {
		delete(n.faults, l)
	} else {
		n.faults[l] = f
	}
	var victims []*pipe
	for p := range n.conns[l] {
		if f.Cut || (f.DropRate > 0 && n.rng.Float64() < f.DropRate) {
			victims = append(victims, p)
		}
	}
	n.stat(l).Reset += int64(len(victims))
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
	for _, p := range victims {
		p.close()
	}
}

// Heal lifts every fault.
func (n *Network) Heal() {
	n.mu.Lock()
	links := make([]Link, 0, len(n.faults))
	for l := range n.faults {
		links = append(links, l)
	}
	n.mu.Unlock()
	for _, l := range links {
		n.Set(l, Fault{})
	}
}

// Faults returns the links with a fault, sorted.
func (n *Network) Faults() map[Link]Fault {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[Link]Fault, len(n.faults))
	for l, f := range n.faults {
		out[l] = f
	}
	return out
}

// Stats returns per-link counters.
func (n *Network) Stats() map[Link]LinkStats {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[Link]LinkStats{}
	for l, s := range n.stats {
		c := *s
		c.Open = len(n.conns[l])
		_, c.Faulted = n.faults[l]
		out[l] = c
	}
	return out
}

// SortedLinks returns the keys of m in order, for printing.
func SortedLinks[V any](m map[Link]V) []Link {
	out := make([]Link, 0, len(m))
	for l := range m {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].From != out[j].From {
			return out[i].From < out[j].From
		}
		return out[i].To < out[j].To
	})
	return out
}

func (n *Network) stat(l Link) *LinkStats {
	s, ok := n.stats[l]
	if !ok {
		s = &LinkStats{}
		n.stats[l] = s
	}
	return s
}

// fault is the fault for a link. A sender a proxy could not identify is
// cut off if any link to the destination is cut or blackholed: when in
// doubt, a partition holds.
func (n *Network) fault(l Link) (Fault, chan struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if l.From != "" {
		return n.faults[l], n.changed
	}
	for k, f := range n.faults {
		if k.To == l.To && (f.Cut || f.Blackhole) {
			return Fault{Cut: true}, n.changed
		}
	}
	return Fault{}, n.changed
}

// admit decides whether a new connection on l may open, registering it.
func (n *Network) admit(l Link, p *pipe) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.stat(l)
	st.Accepted++
	f := n.faults[l]
	if l.From == "" {
		for k, kf := range n.faults {
			if k.To == l.To && (kf.Cut || kf.Blackhole) {
				f = Fault{Cut: true}
			}
		}
	}
	if f.Cut || (f.DropRate > 0 && n.rng.Float64() < f.DropRate) {
		st.Reset++
		return false
	}
	m, ok := n.conns[l]
	if !ok {
		m = map[*pipe]struct{}{}
		n.conns[l] = m
	}
	m[p] = struct{}{}
	return true
}

func (n *Network) forget(l Link, p *pipe) {
	n.mu.Lock()
	delete(n.conns[l], p)
	n.mu.Unlock()
}

func (n *Network) count(l Link, b int) {
	n.mu.Lock()
	n.stat(l).Bytes += int64(b)
	n.mu.Unlock()
}

// Close stops every proxy and closes every connection.
func (n *Network) Close() {
	n.mu.Lock()
	ps := n.proxies
	n.proxies = nil
	var all []*pipe
	for _, m := range n.conns {
		for p := range m {
			all = append(all, p)
		}
	}
	n.mu.Unlock()
	for _, p := range ps {
		p.ln.Close()
	}
	for _, p := range all {
		p.close()
	}
}

// Proxy is one listener forwarding to a target.
type Proxy struct {
	n      *Network
	ln     net.Listener
	target string
	to     string
	// from is the fixed sender, or identify finds it per connection.
	from     string
	identify func(http.Header) string
}

// Addr is the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Listen starts a proxy for the link from→to at addr ("127.0.0.1:0" picks
// a free port) forwarding to target.
func (n *Network) Listen(addr, target, from, to string) (*Proxy, error) {
	return n.listen(addr, target, &Proxy{from: from, to: to})
}

// ListenHTTP starts a proxy in front of node to whose clients speak
// HTTP/1.1: it reads each connection's first request headers and asks
// identify which node sends them ("" when it cannot tell).
func (n *Network) ListenHTTP(addr, target, to string, identify func(http.Header) string) (*Proxy, error) {
	return n.listen(addr, target, &Proxy{to: to, identify: identify})
}

func (n *Network) listen(addr, target string, p *Proxy) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen %s: %w", addr, err)
	}
	p.n, p.ln, p.target = n, ln, target
	n.mu.Lock()
	n.proxies = append(n.proxies, p)
	n.mu.Unlock()
	go p.serve()
	return p, nil
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

// reset closes c with an RST, as a rejecting firewall would.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

func (p *Proxy) handle(c net.Conn) {
	l := Link{From: p.from, To: p.to}
	var head []byte
	if p.identify != nil {
		var err error
		head, l.From, err = p.sniff(c)
		if err != nil {
			c.Close()
			return
		}
	}
	pp := &pipe{n: p.n, link: l, client: c, done: make(chan struct{})}
	if !p.n.admit(l, pp) {
		reset(c)
		return
	}
	defer p.n.forget(l, pp)
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		reset(c)
		return
	}
	pp.mu.Lock()
	pp.server = up
	closed := pp.closed
	pp.mu.Unlock()
	if closed { // cut while dialling
		reset(up)
		return
	}
	pp.run(head)
}

// sniff reads the first request's headers and identifies the sender. It
// returns every byte it consumed, to be forwarded first.
func (p *Proxy) sniff(c net.Conn) ([]byte, string, error) {
	c.SetReadDeadline(time.Now().Add(identifyTimeout))
	defer c.SetReadDeadline(time.Time{})
	var seen bytes.Buffer
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(c, maxHeaderBytes), &seen), 4096)
	req, err := http.ReadRequest(br)
	if err != nil {
		if seen.Len() == 0 {
			return nil, "", err
		}
		return seen.Bytes(), "", nil // not HTTP we understand: unknown sender
	}
	// bufio read ahead of the headers; everything it read is in seen and
	// is forwarded as is, and the pipe continues from c.
	return seen.Bytes(), p.identify(req.Header), nil
}

// pipe is one proxied connection.
type pipe struct {
	n      *Network
	link   Link
	client net.Conn
	mu     sync.Mutex
	server net.Conn
	closed bool
	once   sync.Once
	done   chan struct{}
}

// close aborts the connection both ways with a reset (a fault, or one
// side failed).
func (pp *pipe) close() { pp.shut(true) }

func (pp *pipe) shut(rst bool) {
	pp.once.Do(func() {
		pp.mu.Lock()
		pp.closed = true
		s := pp.server
		pp.mu.Unlock()
		close(pp.done)
		end := net.Conn.Close
		if rst {
			end = func(c net.Conn) error { reset(c); return nil }
		}
		end(pp.client)
		if s != nil {
			end(s)
		}
	})
}

// run forwards both directions until both have ended.
func (pp *pipe) run(head []byte) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pp.forward(pp.client, pp.server, head) }()
	go func() { defer wg.Done(); pp.forward(pp.server, pp.client, nil) }()
	wg.Wait()
	pp.shut(false)
}

type chunk struct {
	at   time.Time
	data []byte
	buf  *[]byte // from chunkPool; nil for the sniffed head
}

// chunkPool recycles read buffers: every byte between the nodes passes
// through a proxy, so a fresh 32 KiB buffer per read would be most of the
// suite's garbage.
var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkBytes); return &b }}

func (c chunk) release() {
	if c.buf != nil {
		chunkPool.Put(c.buf)
	}
}

// forward copies src to dst through the link's fault: held while
// blackholed, delayed by the delay in force when each chunk arrived. A
// clean end of src half-closes dst (the FIN travels on); an error on
// either side or a cut aborts the whole connection.
func (pp *pipe) forward(src, dst net.Conn, head []byte) {
	q := make(chan chunk, queuedChunks)
	var readErr error
	go func() {
		defer close(q)
		if len(head) > 0 {
			q <- chunk{at: time.Now(), data: head}
		}
		for {
			buf := chunkPool.Get().(*[]byte)
			k, err := src.Read(*buf)
			if k > 0 {
				select {
				case q <- chunk{at: time.Now(), data: (*buf)[:k], buf: buf}:
				case <-pp.done:
					chunkPool.Put(buf)
					return
				}
			} else {
				chunkPool.Put(buf)
			}
			if err != nil {
				readErr = err
				return
			}
		}
	}()
	ok := true
	for c := range q {
		if !pp.deliverable(c.at) {
			c.release()
			ok = false
			break
		}
		_, err := dst.Write(c.data)
		pp.n.count(pp.link, len(c.data))
		c.release()
		if err != nil {
			ok = false
			break
		}
	}
	if !ok {
		pp.close()
		for c := range q { // let the reader exit
			c.release()
		}
		return
	}
	// The queue closed: the reader is done and readErr is set.
	if errors.Is(readErr, io.EOF) {
		if tc, isTCP := dst.(*net.TCPConn); isTCP {
			tc.CloseWrite()
			return
		}
	}
	pp.close()
}

// deliverable waits until a chunk that arrived at at may be forwarded:
// after the link's delay, and not while blackholed. It returns false if
// the link is cut or the pipe closed meanwhile.
func (pp *pipe) deliverable(at time.Time) bool {
	for {
		f, changed := pp.n.fault(pp.link)
		if f.Cut {
			return false
		}
		var wait time.Duration
		switch {
		case f.Blackhole:
			wait = time.Hour // until the fault changes
		case f.Delay > 0:
			wait = time.Until(at.Add(f.Delay))
		}
		if wait <= 0 {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-changed:
		case <-pp.done:
			t.Stop()
			return false
		}
		t.Stop()
	}
}
