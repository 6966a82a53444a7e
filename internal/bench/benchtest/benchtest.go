// Package benchtest runs real S3 servers for the bench tests: versitygw's
// gateway (the S3 front end Terrace embeds) over its posix backend, either in
// the test process or as a stand-in "terrace server" child process.
//
// It is imported only by tests, so versitygw is never linked into the
// terrace binary through package bench. embedgw allows one gateway per
// process, and the posix backend changes the process's working directory to
// its root, so tests must resolve testdata paths before starting one.
package benchtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/versity/versitygw/backend/meta"
	"github.com/versity/versitygw/backend/posix"
	"github.com/versity/versitygw/embedgw"
)

// Credentials of the in-process gateway.
const (
	Access = "benchtest"
	Secret = "benchtest-secret"
)

// Serve runs a versitygw posix gateway over dir, listening on addr, with the
// given root credentials, until ctx is done. ready is closed once the port
// accepts connections.
func Serve(ctx context.Context, dir, addr, access, secret string, ready chan<- struct{}) error {
	var ms meta.MetadataStorer = meta.XattrMeta{}
	if err := (meta.XattrMeta{}).Test(dir); err != nil {
		ms = meta.NoMeta{} // e.g. a filesystem without user xattrs
	}
	be, err := posix.New(dir, ms, posix.PosixOpts{NewDirPerm: 0o755, Concurrency: 5000})
	if err != nil {
		return fmt.Errorf("benchtest: posix backend: %w", err)
	}
	go func() {
		defer close(ready)
		c := &http.Client{Timeout: time.Second}
		for ctx.Err() == nil {
			if resp, err := c.Get("http://" + addr + "/"); err == nil {
				resp.Body.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	err = embedgw.RunVersityGW(ctx, be, &embedgw.Config{
		RootUserAccess:    access,
		RootUserSecret:    secret,
		Ports:             []string{addr},
		MaxConnections:    10000,
		MaxRequests:       10000,
		MultipartMaxParts: 10000,
		Quiet:             true,
		KeepAlive:         true,
	})
	if errors.Is(err, context.Canceled) || ctx.Err() != nil {
		return nil
	}
	return err
}

var (
	once     sync.Once
	url      string
	startErr error
	gwDir    string // the gateway's data directory, removed by Cleanup
)

// Cleanup removes the in-process gateway's temp directory; TestMain
// calls it after the tests ran (the gateway itself ends with the process).
func Cleanup() {
	if gwDir != "" {
		os.RemoveAll(gwDir)
	}
}

// Gateway starts the process's in-process gateway over a fresh temp
// directory on first use and returns its URL. It runs until the process
// exits. Credentials are Access and Secret.
func Gateway() (string, error) {
	once.Do(func() {
		dir, err := os.MkdirTemp("", "benchtest-gw-")
		if err != nil {
			startErr = err
			return
		}
		gwDir = dir
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			startErr = err
			return
		}
		addr := l.Addr().String()
		l.Close()
		ready := make(chan struct{})
		errc := make(chan error, 1)
		go func() { errc <- Serve(context.Background(), dir, addr, Access, Secret, ready) }()
		select {
		case <-ready:
			url = "http://" + addr
		case err := <-errc:
			startErr = fmt.Errorf("benchtest: gateway exited: %v", err)
		case <-time.After(30 * time.Second):
			startErr = errors.New("benchtest: gateway did not start within 30s")
		}
	})
	return url, startErr
}

// FakeTerraceEnv, when set to 1 in a test binary's environment, makes
// MaybeRunFakeTerrace act as `terrace server`.
const FakeTerraceEnv = "BENCHTEST_FAKE_TERRACE"

// MaybeRunFakeTerrace is called first thing in TestMain. When the process
// was started by bench.StartTerrace with FakeTerraceEnv=1, it serves S3 like
// `terrace server` would: it parses the same flags, takes the root
// credentials from TERRACE_ROOT_USER/TERRACE_ROOT_PASSWORD, serves until
// SIGTERM and exits 0. Otherwise it returns and the tests run.
func MaybeRunFakeTerrace() {
	if os.Getenv(FakeTerraceEnv) != "1" || len(os.Args) < 2 || os.Args[1] != "server" {
		return
	}
	fs := flag.NewFlagSet("server", flag.ExitOnError)
	dataDir := fs.String("data-dir", "", "")
	s3Addr := fs.String("s3-address", "", "")
	_ = fs.String("admin-address", "", "")
	_ = fs.Parse(os.Args[2:])
	user, pass := os.Getenv("TERRACE_ROOT_USER"), os.Getenv("TERRACE_ROOT_PASSWORD")
	if *dataDir == "" || *s3Addr == "" || user == "" || pass == "" {
		fmt.Fprintln(os.Stderr, "fake terrace: need --data-dir, --s3-address and TERRACE_ROOT_USER/PASSWORD")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := Serve(ctx, *dataDir, *s3Addr, user, pass, make(chan struct{})); err != nil {
		fmt.Fprintln(os.Stderr, "fake terrace:", err)
		os.Exit(1)
	}
	os.Exit(0)
}
