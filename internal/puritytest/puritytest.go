package puritytest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Module is this repository's module path.
const Module = "github.com/terrace-storage/terrace/"

// DefaultForbidden are standard-library packages decision code never
// needs: they do I/O or keep shared state between calls.
var DefaultForbidden = []string{"os", "net", "net/http", "io/fs", "sync", "os/exec", "time/tzdata", "syscall", "unsafe"}

// Rules say what one package may use.
type Rules struct {
	// Name is the package's name in messages ("decide").
	Name string
	// Allowed are packages of this module it may import, relative to the
	// module ("internal/model").
	Allowed []string
	// Forbidden are standard-library packages it must not import, in
	// addition to DefaultForbidden.
	Forbidden []string
	// NoTime forbids importing "time" at all (durations and instants
	// arrive as plain numbers); otherwise only calls of time.Now are
	// forbidden.
	NoTime bool
}

// Check parses the non-test Go files of the current directory (a test
// runs in its package's directory) and reports every import or clock read
// the rules do not allow.
func Check(t testing.TB, r Rules) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	forbidden := append(slices.Clone(DefaultForbidden), r.Forbidden...)
	if r.NoTime {
		forbidden = append(forbidden, "time")
	}
	allowed := map[string]bool{}
	for _, a := range r.Allowed {
		allowed[Module+a] = true
	}
	checked := 0
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
		checked++
		for _, imp := range af.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			first, _, _ := strings.Cut(p, "/")
			switch {
			case allowed[p]:
			case strings.Contains(first, "."):
				t.Errorf("%s imports %s: %s may import only %s", f, p, r.Name, r.allowedList())
			case slices.Contains(forbidden, p):
				t.Errorf("%s imports %s: %s does no I/O, reads no clock and keeps no shared state", f, p, r.Name)
			}
		}
		if strings.Contains(string(src), "time.Now(") {
			t.Errorf("%s reads the clock: time arrives as an argument", f)
		}
	}
	if checked == 0 {
		t.Fatalf("puritytest: no Go files in the test's directory")
	}
}

func (r Rules) allowedList() string {
	if len(r.Allowed) == 0 {
		return "the standard library"
	}
	short := make([]string, len(r.Allowed))
	for i, a := range r.Allowed {
		short[i] = filepath.Base(a)
	}
	return strings.Join(short, ", ") + " and the standard library"
}
