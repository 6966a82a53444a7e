package layout

import (
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestImportsOnlyStdlib enforces that the decision code stays pure: no
// package of this module and nothing outside the standard library (test
// files may use test helpers).
func TestImportsOnlyStdlib(t *testing.T) {
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if strings.Contains(strings.Split(p, "/")[0], ".") {
				t.Errorf("%s imports %s: layout may import only the standard library", e.Name(), p)
			}
		}
	}
}
