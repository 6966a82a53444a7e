package plan

import (
	"strings"
	"testing"
)

// FuzzParseRuleSet: any text parses to a rule set that prints and parses
// back to the same rule set, or to an error — never a panic.
func FuzzParseRuleSet(f *testing.F) {
	for _, spec := range Builtins() {
		f.Add(spec.Name)
	}
	f.Add("device_has_space max_fill=0.9\nload_balanced spread=0.2 weight=3\n# comment\n- tier_fill f=0.8")
	f.Add("isolate bucket=a from=b domain=rack\nco_locate bucket=x with=y")
	f.Add("load_balanced spread=1e309")
	f.Add("failure_domain_spread level=\x00")
	f.Fuzz(func(t *testing.T, text string) {
		rs, err := ParseRuleSet(text)
		if err != nil {
			return
		}
		again, err := ParseRuleSet(rs.String())
		if err != nil {
			t.Fatalf("printed rule set does not parse: %v\n%s", err, rs)
		}
		if again.String() != rs.String() {
			t.Fatalf("round trip changed the rule set:\n%s\nvs\n%s", rs, again)
		}
	})
}

// FuzzParseModel: any text parses to a valid model that prints and parses
// back to the same text, or to an error; a parsed model plans without
// panicking.
func FuzzParseModel(f *testing.F) {
	f.Add("device n1/ssd0 tier=ssd cap=10G\negroup 1 size=1G on=n1/ssd0\n")
	f.Add("cold_load 1\ndevice n1/hdd0 tier=hdd cap=1T rack=r2 health=draining used=5G load=3\ndevice n2/hdd0 tier=hdd cap=1T\negroup 7 size=1.5G load=2 ws=256M vector=hdd=2 bucket=a on=n1/hdd0\n")
	f.Add("device x tier=ssd cap=1 node=n9\negroup 18446744073709551615 size=0 vector=any=8\n")
	f.Add("egroup 1 size=1G vector=ssd=1,hdd=-1\n")
	rules, err := ParseRuleSet("device_has_space\nload_balanced\ndisk_balanced\nrplset_durable\nvector_satisfied\nfailure_domain_spread\ntier_fill\nworking_set_fits\nisolate bucket=a from=b\nco_locate bucket=b with=a")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > 4096 {
			return
		}
		m, err := ParseModel(text)
		if err != nil {
			return
		}
		again, err := ParseModel(m.String())
		if err != nil {
			t.Fatalf("printed model does not parse: %v\n%s", err, m)
		}
		if again.String() != m.String() {
			t.Fatalf("round trip changed the model:\n%s\nvs\n%s", m, again)
		}
		if len(m.Devices) > 16 || len(m.Egroups) > 16 || strings.Count(text, "\n") > 64 {
			return
		}
		p, err := Solve(m, rules, Options{MaxMoves: 100})
		if err != nil {
			t.Fatalf("solve: %v", err)
		}
		if err := checkPlan(m, rules, p); err != nil {
			t.Fatalf("invariant: %v\nmodel:\n%s\nplan:\n%s", err, m, p)
		}
	})
}
