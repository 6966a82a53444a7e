package puritytest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder captures failures instead of failing the test.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, f) }
func (r *recorder) Helper()                   {}

func inDir(t *testing.T, files map[string]string, fn func()) {
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	fn()
}

func TestCheckFindsImpurity(t *testing.T) {
	cases := []struct {
		name, src string
		rules     Rules
		want      int
	}{
		{"clean", "package x\nimport (\"math\"; \"sort\")\nvar _ = math.Pi\nvar _ = sort.Ints\n", Rules{Name: "x"}, 0},
		{"os", "package x\nimport \"os\"\nvar _ = os.Args\n", Rules{Name: "x"}, 1},
		{"module package not allowed", "package x\nimport \"github.com/terrace-storage/terrace/internal/meta\"\nvar _ meta.KV\n", Rules{Name: "x"}, 1},
		{"module package allowed", "package x\nimport \"github.com/terrace-storage/terrace/internal/model\"\nvar _ model.Tier\n", Rules{Name: "x", Allowed: []string{"internal/model"}}, 0},
		{"clock", "package x\nimport \"time\"\nvar _ = time.Now()\n", Rules{Name: "x"}, 1},
		{"time forbidden", "package x\nimport \"time\"\nvar _ time.Duration\n", Rules{Name: "x", NoTime: true}, 1},
		{"third party", "package x\nimport \"golang.org/x/exp/rand\"\nvar _ = rand.Int\n", Rules{Name: "x"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &recorder{TB: t}
			inDir(t, map[string]string{"x.go": c.src, "x_test.go": "package x\nimport \"os\"\nvar _ = os.Args\n"}, func() {
				Check(rec, c.rules)
			})
			if len(rec.errs) != c.want {
				t.Fatalf("%d findings (%s), want %d", len(rec.errs), strings.Join(rec.errs, "; "), c.want)
			}
		})
	}
}
