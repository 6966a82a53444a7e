// Command terrace is Terrace's single binary: the server, the operator
// CLI, the benchmark harness and the simulators.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
