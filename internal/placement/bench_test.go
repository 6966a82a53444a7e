package placement

import (
	"math/rand/v2"
	"testing"

	"github.com/terrace-storage/terrace/internal/model"
)

// benchCluster has 1,000 devices: 200 nodes on 10 racks, each with the
// OctopusFS worker's memory, SSD and three HDDs, at random usage and load.
func benchCluster() *model.Snapshot {
	return genCluster(200, 10, stdNode(), rand.New(rand.NewPCG(1, 2)))
}

func benchPlace(b *testing.B, p Policy, v model.Vector, perOp int, unit string) {
	s := benchCluster()
	if len(s.Devices) != 1000 {
		b.Fatalf("have %d devices", len(s.Devices))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	reqs := make([]Request, 64)
	for i := range reqs {
		reqs[i] = Request{Vector: v, Client: s.Devices[rng.IntN(len(s.Devices))].Node, Bytes: 4 << 20}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Place(s, reqs[i%len(reqs)], rng); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(perOp), unit)
}

// BenchmarkFitnessTwoChoice: target ≤ 2 µs per replica.
func BenchmarkFitnessTwoChoice(b *testing.B) {
	p, _ := New(Config{Name: NameFitness})
	benchPlace(b, p, model.MustParseVector("ssd=1,hdd=2"), 3, "ns/replica")
}

func BenchmarkFitnessTwoChoiceAny(b *testing.B) {
	p, _ := New(Config{Name: NameFitness})
	benchPlace(b, p, model.MustParseVector("any=3"), 3, "ns/replica")
}

func BenchmarkFitnessSUS(b *testing.B) {
	p, _ := New(Config{Name: NameFitness, Selection: SelectSUS})
	benchPlace(b, p, model.MustParseVector("ssd=1,hdd=2"), 3, "ns/replica")
}

// BenchmarkMoop: target ≤ 50 µs per 3-replica decision.
func BenchmarkMoop(b *testing.B) {
	p, _ := New(Config{Name: NameMoop})
	benchPlace(b, p, model.MustParseVector("any=3"), 1, "ns/decision")
}

func BenchmarkMoopExplicit(b *testing.B) {
	p, _ := New(Config{Name: NameMoop})
	benchPlace(b, p, model.MustParseVector("ssd=1,hdd=2"), 1, "ns/decision")
}

func BenchmarkMoopNoClient(b *testing.B) {
	p, _ := New(Config{Name: NameMoop, IgnoreClient: true, AllowMem: true})
	benchPlace(b, p, model.MustParseVector("any=3"), 1, "ns/decision")
}

func BenchmarkUniform(b *testing.B) {
	p, _ := New(Config{Name: NameUniform})
	benchPlace(b, p, model.MustParseVector("any=3"), 3, "ns/replica")
}

func BenchmarkRules(b *testing.B) {
	p, _ := New(Config{Name: NameRules})
	benchPlace(b, p, model.MustParseVector("any=3"), 3, "ns/replica")
}
