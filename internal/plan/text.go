package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/terrace-storage/terrace/internal/model"
)

// The model text format, one item per line ('#' starts a comment):
//
//	cold_load 0.5
//	device n1/ssd0 tier=ssd cap=100G [node=n1] [rack=r1] [health=ok] [used=60G] [load=12]
//	egroup 7 size=1G [load=2] [ws=256M] [vector=ssd=1,hdd=1] [bucket=a] [on=n1/ssd0,n2/hdd0]
//
// A device's node defaults to the part of its ID before '/', its rack to
// "r1". A device's used bytes and load default to the sums over the
// egroups listed on it. An egroup's vector defaults to any=<replicas>.
// Sizes take K, M, G and T suffixes (powers of 1024). Model.String prints
// this format with every value explicit, so a printed model parses back to
// the same model (the fuzzer prints failing models this way).

// MaxModelTextBytes bounds ParseModel's input.
const MaxModelTextBytes = 16 << 20

// ParseModel reads the model text format.
func ParseModel(text string) (*Model, error) {
	if len(text) > MaxModelTextBytes {
		return nil, fmt.Errorf("%w: text of %d bytes exceeds %d", ErrInvalidModel, len(text), MaxModelTextBytes)
	}
	m := &Model{}
	usedSet := map[int]bool{}
	loadSet := map[int]bool{}
	for n, line := range strings.Split(text, "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		errf := func(format string, a ...any) error {
			return fmt.Errorf("%w: line %d: %s", ErrInvalidModel, n+1, fmt.Sprintf(format, a...))
		}
		switch f[0] {
		case "cold_load":
			if len(f) != 2 {
				return nil, errf("cold_load takes one number")
			}
			x, err := strconv.ParseFloat(f[1], 64)
			if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, errf("bad cold_load %q", f[1])
			}
			m.ColdLoad = x
		case "device":
			if len(f) < 2 {
				return nil, errf("device needs an ID")
			}
			d := Device{ID: model.DeviceID(f[1]), Rack: "r1"}
			if node, _, ok := strings.Cut(f[1], "/"); ok {
				d.Node = model.NodeID(node)
			}
			kv, err := keyValues(f[2:], "tier", "cap", "node", "rack", "health", "used", "load")
			if err != nil {
				return nil, errf("device %s: %v", f[1], err)
			}
			if kv["tier"] == "" || kv["cap"] == "" {
				return nil, errf("device %s needs tier= and cap=", f[1])
			}
			d.Tier = model.Tier(kv["tier"])
			if d.CapacityBytes, err = parseBytes(kv["cap"]); err != nil {
				return nil, errf("device %s: cap: %v", f[1], err)
			}
			if v, ok := kv["node"]; ok {
				d.Node = model.NodeID(v)
			}
			if v, ok := kv["rack"]; ok {
				d.Rack = v
			}
			if v, ok := kv["health"]; ok {
				if d.Health, err = ParseHealth(v); err != nil {
					return nil, errf("device %s: %v", f[1], err)
				}
			}
			if v, ok := kv["used"]; ok {
				if d.UsedBytes, err = parseBytes(v); err != nil {
					return nil, errf("device %s: used: %v", f[1], err)
				}
				usedSet[len(m.Devices)] = true
			}
			if v, ok := kv["load"]; ok {
				if d.Load, err = parseLoad(v); err != nil {
					return nil, errf("device %s: load: %v", f[1], err)
				}
				loadSet[len(m.Devices)] = true
			}
			m.Devices = append(m.Devices, d)
		case "egroup":
			if len(f) < 2 {
				return nil, errf("egroup needs an ID")
			}
			id, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				return nil, errf("bad egroup ID %q", f[1])
			}
			e := Egroup{ID: id}
			kv, err := keyValues(f[2:], "size", "load", "ws", "vector", "bucket", "on")
			if err != nil {
				return nil, errf("egroup %d: %v", id, err)
			}
			if kv["size"] == "" {
				return nil, errf("egroup %d needs size=", id)
			}
			if e.SizeBytes, err = parseBytes(kv["size"]); err != nil {
				return nil, errf("egroup %d: size: %v", id, err)
			}
			if v, ok := kv["load"]; ok {
				if e.Load, err = parseLoad(v); err != nil {
					return nil, errf("egroup %d: load: %v", id, err)
				}
			}
			if v, ok := kv["ws"]; ok {
				if e.WorkingSetBytes, err = parseBytes(v); err != nil {
					return nil, errf("egroup %d: ws: %v", id, err)
				}
			}
			e.Bucket = kv["bucket"]
			if v := kv["on"]; v != "" {
				for _, r := range strings.Split(v, ",") {
					e.Replicas = append(e.Replicas, model.DeviceID(r))
				}
			}
			if v, ok := kv["vector"]; ok {
				if e.Vector, err = model.ParseVector(v); err != nil {
					return nil, errf("egroup %d: %v", id, err)
				}
			} else {
				if len(e.Replicas) == 0 {
					return nil, errf("egroup %d has neither replicas nor a vector", id)
				}
				e.Vector = model.Vector{Counts: map[model.Tier]int{model.TierAny: len(e.Replicas)}}
			}
			m.Egroups = append(m.Egroups, e)
		default:
			return nil, errf("unknown item %q (want device, egroup or cold_load)", f[0])
		}
	}
	idx := make(map[model.DeviceID]int, len(m.Devices))
	for i, d := range m.Devices {
		idx[d.ID] = i
	}
	for _, e := range m.Egroups {
		for _, r := range e.Replicas {
			i, ok := idx[r]
			if !ok {
				continue // Validate names it
			}
			if !usedSet[i] {
				m.Devices[i].UsedBytes += e.SizeBytes
			}
			if !loadSet[i] {
				m.Devices[i].Load += e.Load
			}
		}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

func keyValues(fields []string, allowed ...string) (map[string]string, error) {
	kv := map[string]string{}
	for _, x := range fields {
		k, v, ok := strings.Cut(x, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", x)
		}
		known := false
		for _, a := range allowed {
			known = known || a == k
		}
		if !known {
			return nil, fmt.Errorf("unknown key %q (want %s)", k, strings.Join(allowed, ", "))
		}
		if _, dup := kv[k]; dup {
			return nil, fmt.Errorf("%s given twice", k)
		}
		kv[k] = v
	}
	return kv, nil
}

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}}

func parseBytes(in string) (int64, error) {
	s, mult := in, int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(s, u.suffix) {
			mult, s = u.mult, strings.TrimSuffix(s, u.suffix)
			break
		}
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || x < 0 || x*float64(mult) > 1<<62 {
		return 0, fmt.Errorf("bad size %q (want a number of bytes ≥ 0, optionally with K, M, G or T)", in)
	}
	return int64(math.Round(x * float64(mult))), nil
}

func fmtBytes(n int64) string {
	for _, u := range byteUnits {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func parseLoad(s string) (float64, error) {
	x, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return 0, fmt.Errorf("bad load %q", s)
	}
	return x, nil
}

func fmtLoad(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// String prints the model in the text format ParseModel reads.
func (m *Model) String() string {
	var b strings.Builder
	if m.ColdLoad != 0 {
		fmt.Fprintf(&b, "cold_load %s\n", fmtLoad(m.ColdLoad))
	}
	for _, d := range m.Devices {
		fmt.Fprintf(&b, "device %s tier=%s cap=%s", d.ID, d.Tier, fmtBytes(d.CapacityBytes))
		if node, _, ok := strings.Cut(string(d.ID), "/"); !ok || node != string(d.Node) {
			fmt.Fprintf(&b, " node=%s", d.Node)
		}
		if d.Rack != "r1" {
			fmt.Fprintf(&b, " rack=%s", d.Rack)
		}
		if d.Health != HealthOK {
			fmt.Fprintf(&b, " health=%s", d.Health)
		}
		fmt.Fprintf(&b, " used=%s load=%s\n", fmtBytes(d.UsedBytes), fmtLoad(d.Load))
	}
	for _, e := range m.Egroups {
		fmt.Fprintf(&b, "egroup %d size=%s", e.ID, fmtBytes(e.SizeBytes))
		if e.Load != 0 {
			fmt.Fprintf(&b, " load=%s", fmtLoad(e.Load))
		}
		if e.WorkingSetBytes != 0 {
			fmt.Fprintf(&b, " ws=%s", fmtBytes(e.WorkingSetBytes))
		}
		fmt.Fprintf(&b, " vector=%s", e.Vector)
		if e.Bucket != "" {
			fmt.Fprintf(&b, " bucket=%s", e.Bucket)
		}
		if len(e.Replicas) > 0 {
			rs := make([]string, len(e.Replicas))
			for i, r := range e.Replicas {
				rs[i] = string(r)
			}
			fmt.Fprintf(&b, " on=%s", strings.Join(rs, ","))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
