package metarange

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// maxFrameBytes bounds one raft message on the wire. Entries are bounded
// by meta.MaxValueBytes per value and MaxSizePerMsg per append, so a
// larger frame is corruption or a stranger, and the connection is dropped.
const maxFrameBytes = 64 << 20

// peerQueue is how many messages wait for one peer's connection. raft
// resends what is dropped when it is full (a slow or vanished peer).
const peerQueue = 4096

// transport carries raft messages between members: one outbound TCP
// connection per peer, written by its own goroutine, each message framed
// as a 4-byte big-endian length and the protobuf bytes. Writes are
// buffered and flushed when the queue is empty, so a Ready's messages to
// one peer usually leave in one write.
type transport struct {
	self  uint64
	ln    net.Listener
	log   *slog.Logger
	peers map[uint64]*peer
	// step hands an inbound message to raft; unreachable reports a peer
	// whose connection failed, so raft stops pipelining to it.
	step        func(context.Context, *pb.Message) error
	unreachable func(id uint64)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

type peer struct {
	id   uint64
	addr string
	q    chan *pb.Message
}

func newTransport(self uint64, ln net.Listener, addrs map[uint64]string, log *slog.Logger) *transport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &transport{self: self, ln: ln, log: log, peers: map[uint64]*peer{}, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	for id, addr := range addrs {
		if id != self {
			t.peers[id] = &peer{id: id, addr: addr, q: make(chan *pb.Message, peerQueue)}
		}
	}
	return t
}

func (t *transport) start() {
	t.wg.Add(1)
	go t.accept()
	for _, p := range t.peers {
		t.wg.Add(1)
		go t.send(p)
	}
}

// Send queues messages for their peers without blocking.
func (t *transport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		p := t.peers[m.GetTo()]
		if p == nil {
			continue // a member this range does not know: nothing to send to
		}
		select {
		case p.q <- m:
		default:
			t.unreachable(p.id)
		}
	}
}

func (t *transport) send(p *peer) {
	defer t.wg.Done()
	backoff := 50 * time.Millisecond
	for t.ctx.Err() == nil {
		d := net.Dialer{Timeout: time.Second}
		conn, err := d.DialContext(t.ctx, "tcp", p.addr)
		if err != nil {
			t.unreachable(p.id)
			t.dropQueued(p)
			select {
			case <-time.After(backoff):
			case <-t.ctx.Done():
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
		if !t.track(conn) {
			return
		}
		err = t.write(conn, p)
		t.untrack(conn)
		conn.Close()
		if err != nil && t.ctx.Err() == nil {
			t.log.Debug("metarange: peer connection lost", "peer", p.id, "err", err)
			t.unreachable(p.id)
		}
	}
}

// dropQueued empties a peer's queue while it cannot be reached: raft
// sends again what still matters once the peer answers.
func (t *transport) dropQueued(p *peer) {
	for {
		select {
		case <-p.q:
		default:
			return
		}
	}
}

func (t *transport) write(conn net.Conn, p *peer) error {
	w := bufio.NewWriterSize(conn, 256<<10)
	var hdr [4]byte
	buf := make([]byte, 0, 4096)
	for {
		var m *pb.Message
		select {
		case m = <-p.q:
		case <-t.ctx.Done():
			return nil
		}
		for m != nil {
			var err error
			buf, err = proto.MarshalOptions{}.MarshalAppend(buf[:0], m)
			if err != nil {
				return fmt.Errorf("marshal %v: %w", m.GetType(), err)
			}
			binary.BigEndian.PutUint32(hdr[:], uint32(len(buf)))
			if _, err := w.Write(hdr[:]); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			select {
			case m = <-p.q:
			default:
				m = nil
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
}

func (t *transport) accept() {
	defer t.wg.Done()
	for {
		conn, err := t.ln.Accept()
		if err != nil {
			if t.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				t.log.Warn("metarange: accept", "err", err)
			}
			return
		}
		if !t.track(conn) {
			return
		}
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			defer t.untrack(conn)
			defer conn.Close()
			if err := t.read(conn); err != nil && t.ctx.Err() == nil {
				t.log.Debug("metarange: inbound connection closed", "remote", conn.RemoteAddr().String(), "err", err)
			}
		}()
	}
}

func (t *transport) read(conn net.Conn) error {
	r := bufio.NewReaderSize(conn, 256<<10)
	var hdr [4]byte
	var buf []byte
	// Forwarded proposals are stepped apart from the other messages: raft
	// holds a proposal while this member knows no leader, and the message
	// that would tell it (the new leader's) may be next on this
	// connection. A proposal that finds the queue full is dropped, as raft
	// drops one it cannot place; its proposer's commit ends uncertain.
	props := make(chan *pb.Message, peerQueue)
	defer close(props)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		for m := range props {
			if err := t.step(t.ctx, m); err != nil && t.ctx.Err() == nil {
				t.log.Debug("metarange: step", "type", m.GetType().String(), "err", err)
			}
		}
	}()
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return err
		}
		n := binary.BigEndian.Uint32(hdr[:])
		if n > maxFrameBytes {
			return fmt.Errorf("frame of %d bytes, limit %d", n, maxFrameBytes)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		m := &pb.Message{}
		if err := proto.Unmarshal(buf, m); err != nil {
			return fmt.Errorf("unmarshal raft message: %w", err)
		}
		if m.GetTo() != t.self {
			return fmt.Errorf("message for member %d arrived at member %d", m.GetTo(), t.self)
		}
		if m.GetType() == pb.MsgProp {
			select {
			case props <- m:
			default:
				t.log.Debug("metarange: forwarded proposal dropped: queue full", "from", m.GetFrom())
			}
			continue
		}
		if err := t.step(t.ctx, m); err != nil {
			if t.ctx.Err() != nil {
				return nil
			}
			t.log.Debug("metarange: step", "type", m.GetType().String(), "err", err)
		}
	}
}

func (t *transport) track(c net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ctx.Err() != nil {
		c.Close()
		return false
	}
	t.conns[c] = struct{}{}
	return true
}

func (t *transport) untrack(c net.Conn) {
	t.mu.Lock()
	delete(t.conns, c)
	t.mu.Unlock()
}

func (t *transport) close() {
	t.cancel()
	t.ln.Close()
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}
