package devcluster

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// Two processes asking at once get different blocks: the second cannot
// lock the first one's block. The child process is this test binary.
func TestFreeBaseReservesAcrossProcesses(t *testing.T) {
	if os.Getenv("TERRACE_FREEBASE_CHILD") != "" {
		b, err := FreeBase(27000, 10, 100)
		if err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println("base", b)
		return
	}
	mine, err := FreeBase(27000, 10, 100)
	if err != nil {
		t.Fatal(err)
	}
	again, err := FreeBase(27000, 10, 100)
	if err != nil || again == mine {
		t.Fatalf("the same process got block %d twice (%v)", mine, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreeBaseReservesAcrossProcesses$")
	cmd.Env = append(os.Environ(), "TERRACE_FREEBASE_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var theirs int
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "base "); ok {
			theirs, _ = strconv.Atoi(v)
		}
	}
	if theirs == 0 || theirs == mine || theirs == again {
		t.Fatalf("child got block %d, this process holds %d and %d:\n%s", theirs, mine, again, out)
	}
}

func TestFreeBaseSkipsABusyBlock(t *testing.T) {
	base, err := FreeBase(28000, 5, 50)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", base+50+2)) // inside the next block
	if err != nil {
		t.Skip(err)
	}
	defer l.Close()
	next, err := FreeBase(base+50, 5, 50)
	if err != nil {
		t.Fatal(err)
	}
	if next == base+50 {
		t.Fatalf("got block %d although port %d is taken", next, base+52)
	}
	if _, err := FreeBase(1, 5, 2); err == nil {
		t.Fatal("a step smaller than the block was accepted")
	}
}
