package learn

import (
	"testing"
)

// FuzzParseModel: any bytes either parse into a model that validates and
// evaluates to finite Q values, or are refused with an error; never a
// panic.
func FuzzParseModel(f *testing.F) {
	m, _ := NewModel(PaperFeatures, PaperActions, nil, nil)
	b, _ := m.Marshal()
	f.Add(b)
	f.Add([]byte(`{"version":1,"features":["ssd"],"actions":[{"name":"skip","reduce":0},{"name":"run","reduce":1}],"mean":[50],"scale":[10],"weights":[[0],[1]],"bias":[0,0],"alpha":0.01,"gamma":0.9,"epsilon":0.2,"td_clip":100}`))
	f.Add([]byte(`{"version":1,"features":["ssd"],"weights":[[1e308],[1e308]]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseModel(data)
		if err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("ParseModel returned an invalid model: %v", err)
		}
		o := Observation{CPU: 100, Mem: 100, SSDUsage: 100, IOPS: 1e9, ReadIOPS: 1e9, WriteIOPS: 1e9, LatencyMs: 1e9, HDDUsage: 100}
		for _, q := range m.Q(o) {
			if q != q { // NaN
				t.Fatalf("NaN Q value from a validated model")
			}
		}
	})
}

// FuzzParseObservation: refused or valid, never a panic.
func FuzzParseObservation(f *testing.F) {
	f.Add("cpu=10 mem=20 ssd=70 iops=100 riops=60 wiops=40 lat_ms=3 ops=100 hdd=20")
	f.Add("ssd=NaN")
	f.Add("ssd=1e400")
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		o, err := ParseObservation(s)
		if err != nil {
			return
		}
		if err := o.Validate(); err != nil {
			t.Fatalf("ParseObservation accepted an invalid observation: %v", err)
		}
		if _, err := ParseObservation(o.String()); err != nil {
			t.Fatalf("String does not parse back: %v", err)
		}
	})
}
