package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// echoServer echoes every line it reads, prefixed with its name.
func echoServer(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					fmt.Fprintf(c, "%s:%s", name, line)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

type client struct {
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, br: bufio.NewReader(c)}
}

// try dials addr and does one round trip.
func try(addr, line string) (string, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return (&client{c: c, br: bufio.NewReader(c)}).roundTrip(line, time.Second)
}

// roundTrip sends a line and waits up to d for the echo.
func (c *client) roundTrip(line string, d time.Duration) (string, error) {
	c.c.SetDeadline(time.Now().Add(d))
	if _, err := fmt.Fprintf(c.c, "%s\n", line); err != nil {
		return "", err
	}
	s, err := c.br.ReadString('\n')
	return strings.TrimSpace(s), err
}

func TestCutClosesOpenConnectionsAndResetsNewOnes(t *testing.T) {
	n := NewNetwork(1)
	defer n.Close()
	p, err := n.Listen("127.0.0.1:0", echoServer(t, "b"), "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if got, err := c.roundTrip("hello", time.Second); err != nil || got != "b:hello" {
		t.Fatalf("healthy link: %q %v", got, err)
	}
	n.Set(Link{"a", "b"}, Fault{Cut: true})
	if _, err := c.roundTrip("again", time.Second); err == nil {
		t.Fatal("an open connection survived a cut")
	}
	if _, err := try(p.Addr(), "new"); err == nil {
		t.Fatal("a new connection passed a cut link")
	}
	n.Set(Link{"a", "b"}, Fault{})
	if got, err := try(p.Addr(), "healed"); err != nil || got != "b:healed" {
		t.Fatalf("after heal: %q %v", got, err)
	}
	st := n.Stats()[Link{"a", "b"}]
	if st.Reset < 2 || st.Accepted < 3 {
		t.Fatalf("stats %+v", st)
	}
}

func TestBlackholeHoldsBytesUntilHealed(t *testing.T) {
	n := NewNetwork(1)
	defer n.Close()
	p, _ := n.Listen("127.0.0.1:0", echoServer(t, "b"), "a", "b")
	c := dial(t, p.Addr())
	if _, err := c.roundTrip("warm", time.Second); err != nil {
		t.Fatal(err)
	}
	n.Set(Link{"a", "b"}, Fault{Blackhole: true})
	if got, err := c.roundTrip("held", 300*time.Millisecond); err == nil {
		t.Fatalf("a blackholed link delivered %q", got)
	}
	// The bytes are held, not lost: healing delivers them.
	n.Heal()
	c.c.SetDeadline(time.Now().Add(2 * time.Second))
	s, err := c.br.ReadString('\n')
	if err != nil || strings.TrimSpace(s) != "b:held" {
		t.Fatalf("after heal: %q %v", s, err)
	}
}

func TestDelay(t *testing.T) {
	n := NewNetwork(1)
	defer n.Close()
	p, _ := n.Listen("127.0.0.1:0", echoServer(t, "b"), "a", "b")
	n.Set(Link{"a", "b"}, Fault{Delay: 100 * time.Millisecond})
	c := dial(t, p.Addr())
	start := time.Now()
	if got, err := c.roundTrip("slow", 2*time.Second); err != nil || got != "b:slow" {
		t.Fatalf("%q %v", got, err)
	}
	// Both directions are delayed.
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Fatalf("round trip took %s through a 100ms link", took)
	}
}

func TestDropRateOneResetsEveryNewConnection(t *testing.T) {
	n := NewNetwork(1)
	defer n.Close()
	p, _ := n.Listen("127.0.0.1:0", echoServer(t, "b"), "a", "b")
	n.Set(Link{"a", "b"}, Fault{DropRate: 1})
	for i := 0; i < 5; i++ {
		if _, err := try(p.Addr(), "x"); err == nil {
			t.Fatal("a connection passed a link dropping all")
		}
	}
}

// TestHalfCloseForwardsFIN: a client that closes its write side still
// gets the whole answer (HTTP/1.0-style request, read-to-EOF servers).
func TestHalfCloseForwardsFIN(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "got %d bytes", len(b))
		c.Close()
	}()
	n := NewNetwork(1)
	defer n.Close()
	p, _ := n.Listen("127.0.0.1:0", ln.Addr().String(), "a", "b")
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(make([]byte, 100000))
	c.(*net.TCPConn).CloseWrite()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got 100000 bytes" {
		t.Fatalf("%q %v", b, err)
	}
}

// TestHTTPSenderIdentification: one proxy in front of node c serves a and
// b; a cut a→c stops a's requests and not b's, and a sender it cannot
// identify is refused while any link to c is cut.
func TestHTTPSenderIdentification(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hi "+r.Header.Get("X-Who"))
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	n := NewNetwork(1)
	defer n.Close()
	p, err := n.ListenHTTP("127.0.0.1:0", ln.Addr().String(), "c", func(h http.Header) string { return h.Get("X-Who") })
	if err != nil {
		t.Fatal(err)
	}
	get := func(who string) error {
		// A fresh transport per call: every request opens a connection.
		hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		req, _ := http.NewRequest("GET", "http://"+p.Addr()+"/", nil)
		if who != "" {
			req.Header.Set("X-Who", who)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if string(b) != "hi "+who {
			return fmt.Errorf("answer %q", b)
		}
		return nil
	}
	for _, who := range []string{"a", "b", ""} {
		if err := get(who); err != nil {
			t.Fatalf("healthy, from %q: %v", who, err)
		}
	}
	n.Set(Link{"a", "c"}, Fault{Cut: true})
	if err := get("a"); err == nil {
		t.Fatal("a reached c through a cut link")
	}
	if err := get("b"); err != nil {
		t.Fatalf("b cut off by a's partition: %v", err)
	}
	if err := get(""); err == nil {
		t.Fatal("an unidentified sender passed while a link to c is cut")
	}
	n.Heal()
	if err := get("a"); err != nil {
		t.Fatalf("after heal: %v", err)
	}
}
