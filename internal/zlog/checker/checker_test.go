package checker

import (
	"strings"
	"testing"
	"time"
)

const timeout = 10 * time.Second

func TestGoodHistory(t *testing.T) {
	ops := []Op{
		{Client: 0, Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 10},
		{Client: 1, Kind: Append, Value: "b", Pos: 1, OK: true, Call: 1, Return: 12},
		{Client: 2, Kind: Read, Pos: 1, Value: NotWritten, OK: true, Call: 2, Return: 3}, // before b landed
		{Client: 2, Kind: Read, Pos: 0, Value: "a", OK: true, Call: 11, Return: 13},
		{Client: 3, Kind: Append, Value: "c", OK: false, Call: 5, Return: 20}, // died; landed at 3
		{Client: 2, Kind: Fill, Pos: 2, Value: Filled, OK: true, Call: 30, Return: 31},
		{Client: 2, Kind: Tail, Pos: 4, OK: true, Call: 32, Return: 33},
	}
	final := map[uint64]string{0: "a", 1: "b", 2: Filled, 3: "c"}
	r := Check(ops, final, 4, timeout)
	if !r.OK() {
		t.Fatalf("good history rejected: %s", r)
	}
	if r.Acked != 2 || r.Unknown != 1 || r.Filled != 1 {
		t.Fatalf("counts: %s", r)
	}
}

func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ops   []Op
		final map[uint64]string
		tail  uint64
		want  string
	}{
		{"lost ack", []Op{{Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 1}},
			map[uint64]string{0: Filled}, 1, "lost"},
		{"moved ack", []Op{{Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 1}},
			map[uint64]string{0: Filled, 1: "a"}, 2, "found at [1]"},
		{"duplicate", []Op{{Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 1}},
			map[uint64]string{0: "a", 1: "a"}, 2, "at 2 positions"},
		{"hole", nil, map[uint64]string{0: "x"}, 2, "hole at position 1"},
		{"read saw an entry later replaced by a fill", []Op{
			{Kind: Read, Pos: 0, Value: "a", OK: true, Call: 0, Return: 1},
		}, map[uint64]string{0: Filled}, 1, "not linearizable"},
		{"read saw two entries", []Op{
			{Kind: Read, Pos: 0, Value: "a", OK: true, Call: 0, Return: 1},
			{Kind: Read, Pos: 0, Value: "b", OK: true, Call: 2, Return: 3},
		}, map[uint64]string{0: "b"}, 1, "not linearizable"},
		{"not written after written", []Op{
			{Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 1},
			{Kind: Read, Pos: 0, Value: NotWritten, OK: true, Call: 2, Return: 3},
		}, map[uint64]string{0: "a"}, 1, "not linearizable"},
		{"two acks one position", []Op{
			{Kind: Append, Value: "a", Pos: 0, OK: true, Call: 0, Return: 1},
			{Kind: Append, Value: "b", Pos: 0, OK: true, Call: 0, Return: 1},
		}, map[uint64]string{0: "a"}, 1, "lost"},
		{"ack beyond a later tail", []Op{
			{Kind: Append, Value: "a", Pos: 4, OK: true, Call: 0, Return: 1},
			{Kind: Tail, Pos: 3, OK: true, Call: 2, Return: 3},
		}, map[uint64]string{0: Filled, 1: Filled, 2: Filled, 3: Filled, 4: "a"}, 5, "before a Tail call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check(tc.ops, tc.final, tc.tail, timeout)
			if r.OK() {
				t.Fatalf("bad history accepted: %s", r)
			}
			if !strings.Contains(r.String(), tc.want) {
				t.Fatalf("report does not say %q:\n%s", tc.want, r)
			}
		})
	}
}
