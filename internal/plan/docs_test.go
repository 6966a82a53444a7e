package plan

import (
	"os"
	"strings"
	"testing"
)

// docs/planner.md documents every built-in rule and parameter.
func TestDocsListEveryRule(t *testing.T) {
	b, err := os.ReadFile("../../docs/planner.md")
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	doc := string(b)
	for _, spec := range Builtins() {
		if !strings.Contains(doc, "`"+spec.Name+"`") {
			t.Errorf("docs/planner.md does not document rule %s", spec.Name)
		}
		for _, p := range spec.Params {
			if !strings.Contains(doc, "`"+p.Name+"`") {
				t.Errorf("docs/planner.md does not document parameter %s of %s", p.Name, spec.Name)
			}
		}
		if spec.Doc == "" {
			t.Errorf("rule %s has no doc line", spec.Name)
		}
	}
}
