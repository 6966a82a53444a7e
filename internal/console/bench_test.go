package console

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

// BenchmarkSessionVerify is the per-request cost of the console's
// authentication (two HMACs and a keyring lookup).
func BenchmarkSessionVerify(b *testing.B) {
	s, _ := testSessions(adminauth.StaticKeyring{"admin": {Secret: "s3cret", Admin: true}})
	tok, _, err := s.login("admin", "s3cret")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := s.verify(tok); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSamplerTake is one sample of a 300-device cluster (the tier
// report is read every sixth sample, as on a node).
func BenchmarkSamplerTake(b *testing.B) {
	src := &countingSource{}
	for i := range 300 {
		tier := []string{"ssd", "hdd", "hdd"}[i%3]
		src.devs = append(src.devs, DeviceReading{ID: fmt.Sprintf("n%d/%s%d", i/10, tier, i), Tier: tier, CapacityBytes: 1 << 40, UsedBytes: int64(i) << 30, Local: i < 10})
	}
	src.tiers = []TierReading{{Tier: "ssd", HotBytes: 1 << 40}, {Tier: "hdd", ColdBytes: 1 << 45}}
	s := NewSampler(src, time.Second, 6*time.Second, 720)
	now := time.Unix(1_800_000_000, 0)
	for b.Loop() {
		now = now.Add(time.Second)
		s.Want() // a console page is open
		s.Take(context.Background(), now)
	}
}

// BenchmarkHistoryJSON encodes a full ring (720 samples, 4 tiers): what
// the tiers page downloads.
func BenchmarkHistoryJSON(b *testing.B) {
	src := &countingSource{devs: []DeviceReading{{ID: "a", Tier: "mem", Local: true}, {ID: "b", Tier: "ssd", Local: true},
		{ID: "c", Tier: "hdd", Local: true}, {ID: "d", Tier: "remote", Local: true}}}
	s := NewSampler(src, time.Second, time.Second, 720)
	now := time.Unix(1_800_000_000, 0)
	for range 720 {
		now = now.Add(time.Second)
		s.Take(context.Background(), now)
	}
	var size int
	for b.Loop() {
		out, err := json.Marshal(s.History(time.Time{}))
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "json-bytes")
}
