package metarange

import (
	"encoding/binary"
	"io"
	"log"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// TestProposalDoesNotBlockInbound: a forwarded proposal that arrives while
// this member knows no leader must not hold up the messages behind it on
// the same connection, among them the new leader's heartbeat that would
// let raft take the proposal.
func TestProposalDoesNotBlockInbound(t *testing.T) {
	ms := raft.NewMemoryStorage()
	node := raft.StartNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256,
		Logger: &raft.DefaultLogger{Logger: log.New(io.Discard, "", 0)}}, []raft.Peer{{ID: 1}, {ID: 2}})
	defer node.Stop()
	go func() {
		for rd := range node.Ready() {
			ms.Append(rd.Entries)
			if rd.HardState != nil && !raft.IsEmptyHardState(rd.HardState) {
				ms.SetHardState(rd.HardState)
			}
			node.Advance()
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := newTransport(1, ln, map[uint64]string{1: ln.Addr().String(), 2: "127.0.0.1:1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	tp.step = node.Step
	tp.unreachable = node.ReportUnreachable
	tp.start()
	defer tp.close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	send := func(m *pb.Message) {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
		if _, err := conn.Write(append(hdr[:], b...)); err != nil {
			t.Fatal(err)
		}
	}
	send(&pb.Message{Type: pb.MsgProp.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Entries: []*pb.Entry{{Data: []byte("x")}}})
	send(&pb.Message{Type: pb.MsgHeartbeat.Enum(), From: proto.Uint64(2), To: proto.Uint64(1), Term: proto.Uint64(5)})
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if node.Status().Lead == 2 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the leader's heartbeat behind a forwarded proposal was never stepped")
}
