package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// TerraceOptions describe a local single-node Terrace started for a
// benchmark. Zero fields take defaults.
type TerraceOptions struct {
	// Binary is the terrace executable. Default: this program
	// (os.Executable), which is terrace itself when run as `terrace bench`.
	Binary string
	// DataDir is passed as --data-dir. Default: a fresh directory under
	// the system temp dir, removed on Stop.
	DataDir string
	// S3Address and AdminAddress are passed as --s3-address and
	// --admin-address. Default: free ports on 127.0.0.1.
	S3Address    string
	AdminAddress string
	// User and Password are the root credentials, passed in the environment
	// as TERRACE_ROOT_USER and TERRACE_ROOT_PASSWORD.
	User, Password string
	// Args are extra flags appended to the server command line (e.g. a
	// durability setting).
	Args []string
	// StartTimeout bounds the wait for the S3 port to answer. Default 60s.
	StartTimeout time.Duration
	// Keep leaves the temp directory (data and server log) in place.
	Keep bool
}

// Terrace is a running server started by StartTerrace.
type Terrace struct {
	opts   TerraceOptions
	cmd    *exec.Cmd
	tmpDir string
	logF   *os.File
	logP   string
	exited chan struct{}
	err    error // from Wait, valid after exited is closed
}

// StartTerrace launches
//
//	BIN server --data-dir DIR --s3-address 127.0.0.1:P --admin-address 127.0.0.1:Q [ARGS…]
//
// with TERRACE_ROOT_USER/TERRACE_ROOT_PASSWORD set, and returns once the S3
// port answers HTTP. The server's output goes to a log file whose tail is
// included in any startup error. Call Stop when done.
func StartTerrace(ctx context.Context, opts TerraceOptions) (*Terrace, error) {
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("bench: terrace binary: %w", err)
		}
		opts.Binary = exe
	}
	if opts.User == "" {
		opts.User = "terrace-bench"
	}
	if opts.Password == "" {
		opts.Password = "terrace-bench-secret"
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 60 * time.Second
	}
	tmp, err := os.MkdirTemp("", "terrace-bench-server-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	t := &Terrace{tmpDir: tmp, exited: make(chan struct{})}
	fail := func(err error) (*Terrace, error) {
		if !opts.Keep {
			os.RemoveAll(tmp)
		}
		return nil, err
	}
	if opts.DataDir == "" {
		opts.DataDir = filepath.Join(tmp, "data")
		if err := os.Mkdir(opts.DataDir, 0o755); err != nil {
			return fail(fmt.Errorf("bench: %w", err))
		}
	}
	for _, a := range []*string{&opts.S3Address, &opts.AdminAddress} {
		if *a == "" {
			if *a, err = freeLoopbackAddr(); err != nil {
				return fail(err)
			}
		}
	}
	t.opts = opts
	t.logP = filepath.Join(tmp, "server.log")
	if t.logF, err = os.Create(t.logP); err != nil {
		return fail(fmt.Errorf("bench: %w", err))
	}
	args := append([]string{"server", "--data-dir", opts.DataDir, "--s3-address", opts.S3Address,
		"--admin-address", opts.AdminAddress}, opts.Args...)
	t.cmd = exec.Command(opts.Binary, args...)
	t.cmd.Env = append(os.Environ(), "TERRACE_ROOT_USER="+opts.User, "TERRACE_ROOT_PASSWORD="+opts.Password)
	t.cmd.Stdout, t.cmd.Stderr = t.logF, t.logF
	// Own process group: a ^C at the terminal reaches the benchmark, which
	// then stops the server in order. Pdeathsig: the server never outlives
	// the benchmark.
	t.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := t.cmd.Start(); err != nil {
		t.logF.Close()
		return fail(fmt.Errorf("bench: start %s: %w", opts.Binary, err))
	}
	go func() {
		t.err = t.cmd.Wait()
		close(t.exited)
	}()
	if err := t.waitReady(ctx); err != nil {
		tail := t.LogTail(20)
		t.Stop()
		return nil, fmt.Errorf("%w\n%s", err, tail)
	}
	return t, nil
}

// freeLoopbackAddr returns 127.0.0.1:PORT for a port that was free a moment
// ago (the kernel's choice for port 0).
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("bench: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (t *Terrace) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(t.opts.StartTimeout)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-t.exited:
			return fmt.Errorf("bench: terrace server exited during startup: %v", t.err)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if err := WaitHTTP(client, "http://"+t.opts.S3Address+"/"); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: terrace S3 port %s did not answer within %s", t.opts.S3Address, t.opts.StartTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitHTTP sends one GET to url and succeeds on any HTTP response (an S3
// service answers an anonymous request with 403, which still means it is up).
func WaitHTTP(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Endpoint describes the server for a benchmark, named name.
func (t *Terrace) Endpoint(name string) Endpoint {
	return Endpoint{Name: name, URL: "http://" + t.opts.S3Address, Access: t.opts.User, Secret: t.opts.Password,
		Region: DefaultRegion, PID: t.cmd.Process.Pid}
}

// PID is the server's process id.
func (t *Terrace) PID() int { return t.cmd.Process.Pid }

// DataDir is the server's data directory.
func (t *Terrace) DataDir() string { return t.opts.DataDir }

// LogPath is the server's combined stdout and stderr.
func (t *Terrace) LogPath() string { return t.logP }

// LogTail returns up to the last n lines of the server log.
func (t *Terrace) LogTail(n int) string {
	b, err := os.ReadFile(t.logP)
	if err != nil {
		return ""
	}
	lines := strings.Split(string(bytes.TrimRight(b, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "server log (" + t.logP + "):\n  " + strings.Join(lines, "\n  ")
}

// stopGrace is how long a server gets to exit after SIGTERM before SIGKILL.
const stopGrace = 15 * time.Second

// Stop sends SIGTERM, waits up to 15 s, then SIGKILL, and removes the temp
// directory unless Keep. It reports an unclean exit.
func (t *Terrace) Stop() error {
	defer func() {
		t.logF.Close()
		if !t.opts.Keep {
			os.RemoveAll(t.tmpDir)
		}
	}()
	select {
	case <-t.exited:
		return fmt.Errorf("bench: terrace server had already exited: %v", t.err)
	default:
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-t.exited:
	case <-time.After(stopGrace):
		_ = t.cmd.Process.Kill()
		<-t.exited
		return fmt.Errorf("bench: terrace server ignored SIGTERM for %s; killed", stopGrace)
	}
	var ee *exec.ExitError
	if t.err != nil && !(errors.As(t.err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled()) {
		return fmt.Errorf("bench: terrace server exit: %v", t.err)
	}
	return nil
}
