package checker

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/terrace-storage/terrace/internal/chaos/history"
)

var seedFlag = flag.Uint64("seed", 0, "first seed of the property tests (0: random)")

func firstSeed() uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	return rand.Uint64()
}

// simulate produces a history of a correct store: every operation takes
// effect at one random instant inside its interval (an unknown-outcome
// write possibly later, or never), and reads return the register's value
// at their instant. Final reads follow every other operation.
func simulate(seed uint64, clients, opsPerClient int, keys []string) []history.Op {
	rng := rand.New(rand.NewPCG(seed, 7))
	type effect struct {
		at  int64
		op  int // index into ops
		val string
	}
	var ops []history.Op
	var effects []effect
	nextWrite := int64(1)
	for c := 0; c < clients; c++ {
		t := int64(rng.IntN(20))
		for i := 0; i < opsPerClient; i++ {
			// Strictly after the previous return: touching intervals are
			// concurrent (porcupine's closed intervals), which would make a
			// single client's operations ambiguous in order.
			call := t + 1 + int64(rng.IntN(10))
			ret := call + 1 + int64(rng.IntN(40))
			t = ret
			op := history.Op{ID: int64(len(ops) + 1), Client: c, Key: keys[rng.IntN(len(keys))], Call: call, Return: ret, Outcome: history.OK}
			at := call + rng.Int64N(ret-call+1)
			switch x := rng.IntN(10); {
			case x < 4:
				op.Kind, op.Write = history.Put, nextWrite
				op.Digest = fmt.Sprintf("v%d", nextWrite)
				op.Size, op.ETag = int64(len(op.Digest)), "e"+op.Digest
				nextWrite++
				switch y := rng.IntN(10); {
				case y == 0: // unknown: took effect, perhaps long after
					op.Outcome = history.Unknown
					at = call + rng.Int64N(200)
				case y == 1: // unknown: never took effect
					op.Outcome = history.Unknown
					at = -1
				case y == 2: // refused: no effect
					op.Outcome = history.Fail
					at = -1
				}
				if at >= 0 {
					effects = append(effects, effect{at: at, op: len(ops), val: op.Digest})
				}
			case x < 5:
				op.Kind = history.Delete
				effects = append(effects, effect{at: at, op: len(ops), val: ""})
			default:
				op.Kind = history.Get
				effects = append(effects, effect{at: at, op: len(ops), val: "?"})
			}
			ops = append(ops, op)
		}
	}
	end := int64(0)
	for _, e := range effects {
		end = max(end, e.at)
	}
	for _, o := range ops {
		end = max(end, o.Return)
	}
	for i, k := range keys {
		op := history.Op{ID: int64(len(ops) + 1), Client: clients, Key: k, Kind: history.Get, Final: true,
			Call: end + 10 + int64(i), Return: end + 11 + int64(i), Outcome: history.OK}
		effects = append(effects, effect{at: op.Call, op: len(ops), val: "?"})
		ops = append(ops, op)
	}
	// Apply effects in instant order (ties: in generation order).
	sort.SliceStable(effects, func(i, j int) bool { return effects[i].at < effects[j].at })
	reg := map[string]string{}
	for _, e := range effects {
		op := &ops[e.op]
		if e.val == "?" {
			v := reg[op.Key]
			op.Found = v != ""
			if op.Found {
				op.Digest, op.Size, op.ETag = v, int64(len(v)), "e"+v
			}
			continue
		}
		reg[op.Key] = e.val
	}
	return ops
}

// TestCorrectHistoriesPass: histories of a correct store are never
// flagged, whatever the concurrency and unknown outcomes.
func TestCorrectHistoriesPass(t *testing.T) {
	seed0 := firstSeed()
	for i := 0; i < 200; i++ {
		seed := seed0 + uint64(i)
		ops := simulate(seed, 1+int(seed%6), 30, []string{"a", "b", "c"})
		r := Check(ops, Options{})
		if !r.OK() || len(r.Undecided) > 0 {
			for _, op := range ops {
				t.Log(op)
			}
			t.Fatalf("seed %d: a correct history was flagged:\n%s(replay: go test ./internal/chaos/history/checker -run CorrectHistoriesPass -seed %d)",
				seed, printReport(r), seed)
		}
	}
}

// TestLostWriteIsAlwaysFound: dropping the effect of the last
// acknowledged write of a key (the store lost it) is always reported.
func TestLostWriteIsAlwaysFound(t *testing.T) {
	seed0 := firstSeed()
	for i := 0; i < 100; i++ {
		seed := seed0 + uint64(i)
		ops := simulate(seed, 1, 20, []string{"a"}) // one client: no concurrency
		// Find the last acknowledged write or delete before the final read.
		last := -1
		for j, op := range ops {
			if !op.Final && (op.Kind.IsWrite() || op.Kind == history.Delete) && op.Outcome == history.OK {
				last = j
			}
		}
		if last < 0 || !ops[last].Kind.IsWrite() {
			continue
		}
		fin := &ops[len(ops)-1]
		fin.Found, fin.Digest, fin.Size, fin.ETag = false, "", 0, ""
		if r := Check(ops, Options{}); r.Lost.Count == 0 {
			t.Fatalf("seed %d: a lost write went unnoticed:\n%s", seed, printReport(r))
		}
	}
}
