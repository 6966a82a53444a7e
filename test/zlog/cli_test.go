package zlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// terraceCLI runs the terrace binary against a node's admin API.
func terraceCLI(t *testing.T, admin, stdin string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(terraceBin, args...)
	cmd.Env = append(cmd.Environ(), "TERRACE_ENDPOINT=http://"+admin, "TERRACE_ACCESS_KEY=terrace", "TERRACE_SECRET_KEY=terrace-secret")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// TestCLIThroughEveryNode: `terrace log append` through every node of a
// 3-node cluster returns increasing positions (alone on stdout), `log read`
// through another node returns exactly the bytes, and tail, status, ls,
// trim and the error cases behave as documented.
func TestCLIThroughEveryNode(t *testing.T) {
	c := startCluster(t, 3, 32500)
	admin := func(i int) string { return c.Nodes[i%len(c.Nodes)].Admin }
	if out, errOut, err := terraceCLI(t, admin(0), "", "log", "create", "cli", "--stripes", "4"); err != nil {
		t.Fatalf("create: %v %s %s", err, out, errOut)
	}
	var last int64 = -1
	payloads := map[uint64]string{}
	for i := 0; i < 9; i++ {
		data := fmt.Sprintf("entry %d via %s", i, c.Nodes[i%3].ID)
		args := []string{"log", "append", "cli", data}
		stdin := ""
		if i%2 == 1 { // binary, from standard input
			data += "\x00\xff\n binary"
			args, stdin = []string{"log", "append", "cli", "-"}, data
		}
		out, errOut, err := terraceCLI(t, admin(i), stdin, args...)
		if err != nil {
			t.Fatalf("append via %s: %v %s", admin(i), err, errOut)
		}
		pos, err := strconv.ParseInt(strings.TrimSuffix(out, "\n"), 10, 64)
		if err != nil || strings.Count(out, "\n") != 1 {
			t.Fatalf("append printed %q, want the position alone", out)
		}
		if pos <= last {
			t.Fatalf("positions not increasing: %d after %d", pos, last)
		}
		last = pos
		payloads[uint64(pos)] = data
	}
	for pos, want := range payloads {
		out, errOut, err := terraceCLI(t, admin(int(pos)+1), "", "log", "read", "cli", strconv.FormatUint(pos, 10))
		if err != nil || out != want {
			t.Fatalf("read %d: %q (%v %s), want %q", pos, out, err, errOut, want)
		}
	}
	out, _, err := terraceCLI(t, admin(2), "", "log", "tail", "cli")
	if err != nil || strings.TrimSpace(out) != strconv.FormatInt(last+1, 10) {
		t.Fatalf("tail: %q %v, want %d", out, err, last+1)
	}
	out, _, err = terraceCLI(t, admin(1), "", "log", "status", "cli", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Epoch     uint64  `json:"epoch"`
		Tail      *uint64 `json:"tail"`
		Sequencer string  `json:"sequencer"`
		Stripes   int     `json:"stripes"`
		Segments  []struct {
			Stripes [][]struct {
				Node string `json:"n"`
			} `json:"stripes"`
		} `json:"segments"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	if st.Epoch < 1 || st.Tail == nil || *st.Tail != uint64(last+1) || st.Stripes != 4 || len(st.Segments) != 1 {
		t.Fatalf("status: %+v", st)
	}
	found := false
	for _, n := range c.Nodes {
		found = found || n.ID == st.Sequencer
	}
	if !found {
		t.Fatalf("status names sequencer %q, not a node", st.Sequencer)
	}
	nodes := map[string]bool{}
	for _, stripe := range st.Segments[0].Stripes {
		if len(stripe) != 2 {
			t.Fatalf("stripe with %d replicas, want 2 (any=2)", len(stripe))
		}
		if stripe[0].Node == stripe[1].Node {
			t.Fatalf("both replicas of a stripe on %s", stripe[0].Node)
		}
		nodes[stripe[0].Node] = true
	}
	if len(nodes) < 2 {
		t.Fatalf("every primary on one node: %v", nodes)
	}
	// Errors: a hole above the tail, a bad position, an unknown log.
	if _, errOut, err := terraceCLI(t, admin(0), "", "log", "read", "cli", "1000"); err == nil || !strings.Contains(errOut, "not written") {
		t.Fatalf("read beyond the tail: %v %q", err, errOut)
	}
	if _, errOut, err := terraceCLI(t, admin(0), "", "log", "read", "cli", "-3"); err == nil || errOut == "" {
		t.Fatalf("negative position accepted: %v", err)
	}
	if _, errOut, err := terraceCLI(t, admin(0), "", "log", "tail", "nope"); err == nil || !strings.Contains(errOut, "no log") {
		t.Fatalf("tail of an unknown log: %v %q", err, errOut)
	}
	// Prefix trim, then the trimmed entry reads as trimmed everywhere.
	if _, errOut, err := terraceCLI(t, admin(0), "", "log", "trim", "cli", "2", "--prefix"); err != nil {
		t.Fatalf("trim: %v %s", err, errOut)
	}
	if _, errOut, err := terraceCLI(t, admin(2), "", "log", "read", "cli", "0"); err == nil || !strings.Contains(errOut, "trimmed") {
		t.Fatalf("read of a trimmed position: %v %q", err, errOut)
	}
	out, _, err = terraceCLI(t, admin(1), "", "log", "ls")
	if err != nil || !strings.Contains(out, "cli") {
		t.Fatalf("ls: %q %v", out, err)
	}
}
