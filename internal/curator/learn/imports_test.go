package learn

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The learner is pure: it may import only model and standard-library
// packages that do no I/O.
func TestImportsArePure(t *testing.T) {
	allowed := map[string]bool{"github.com/terrace-storage/terrace/internal/model": true}
	forbidden := map[string]bool{"os": true, "net": true, "net/http": true, "io/fs": true, "sync": true, "os/exec": true, "time/tzdata": true}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		af, err := parser.ParseFile(fset, f, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			first, _, _ := strings.Cut(p, "/")
			switch {
			case allowed[p]:
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: learn may import only model and the standard library", f, p)
			case forbidden[p]:
				t.Errorf("%s imports %s: learn does no I/O and keeps no shared state", f, p)
			}
		}
		// No clock: time arrives as an argument.
		if strings.Contains(string(src), "time.Now(") {
			t.Errorf("%s reads the clock", f)
		}
	}
}
