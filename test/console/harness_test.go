// Package console_test drives the web console in a real headless Chromium
// against a real `terrace server` process: real S3 uploads, the real admin
// API, the real Curator. Nothing is mocked.
//
// Chromium comes from the Debian packages chromium and chromium-driver
// (.ci/run installs them); without a chromium binary every test skips and
// says so. TERRACE_CHROMIUM names another binary. With
// TERRACE_CONSOLE_SCREENSHOTS=DIR the tests also save PNG screenshots of
// each page there (docs/img holds the ones docs/operations.md shows).
package console_test

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/chromedp/chromedp"

	"github.com/terrace-storage/terrace/internal/adminauth"
)

const (
	rootUser     = "console-admin"
	rootPassword = "console-test-secret"
)

var (
	terraceBin string
	chromePath string
	// skipReason is set when the browser tests cannot run here.
	skipReason string
)

func TestMain(m *testing.M) { os.Exit(runMain(m)) }

func runMain(m *testing.M) int {
	flag.Parse()
	chromePath = findChromium()
	if chromePath == "" {
		skipReason = "no Chromium found (install the Debian packages chromium and chromium-driver, or set TERRACE_CHROMIUM): the console's browser tests are skipped"
		fmt.Fprintln(os.Stderr, "console tests:", skipReason)
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "terrace-console-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "console tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	terraceBin = filepath.Join(dir, "terrace")
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "console tests:", err)
		return 1
	}
	cmd := exec.Command("go", "build", "-o", terraceBin, "./cmd/terrace")
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "console tests: building terrace:", err)
		return 1
	}
	return m.Run()
}

func findChromium() string {
	if p := os.Getenv("TERRACE_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		return ""
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func needBrowser(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the test directory")
		}
		dir = parent
	}
}

func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// node is one running `terrace server` process.
type node struct {
	admin, s3 string // http://host:port
	dir       string
}

// startNode runs a single node with one device of every local tier. The
// ssd is small and tiering thresholds low, so that a full scan has cold
// data to move down (tier-down tasks with reasons); no scan runs on its
// own, only the ones the test asks for.
func startNode(t *testing.T) *node {
	t.Helper()
	dir := t.TempDir()
	n := &node{admin: freeAddr(t), s3: freeAddr(t), dir: dir}
	cfg := fmt.Sprintf(`node_id: n1
rack: r1
data_dir: %[1]s/data
s3_address: %[2]s
admin_address: %[3]s
root_user: %[4]s
root_password: %[5]s
default_vector: any=2
egroup_max_bytes: 1048576
probe_bytes: 65536
console_sample_every: 1s
devices:
  - mem::64MiB
  - ssd:%[1]s/ssd0:48MiB
  - hdd:%[1]s/hdd0:1GiB
  - hdd:%[1]s/hdd1:1GiB
curator:
  partial_every: 1h
  full_every: 1h
  tier_check_interval: 1h
  tier_down_above: 0.1
  tier_dest_below: 0.9
  hot_window: 1s
  garbage_grace: 1s
  seal_idle: 1ms
`, dir, n.s3, n.admin, rootUser, rootPassword)
	cfgPath := filepath.Join(dir, "terrace.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(terraceBin, "server", "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("server log (last 4 KiB):\n%s", tail(b, 4096))
		}
	})
	hc := adminauth.Client(rootUser, rootPassword)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := hc.Get("http://" + n.admin + "/v1/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(logf.Name())
			t.Fatalf("terrace server exited at start-up:\n%s", tail(b, 4096))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("terrace server did not become healthy within 60s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.admin, n.s3 = "http://"+n.admin, "http://"+n.s3
	return n
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// s3Client talks to the node's S3 endpoint as the root account.
func (n *node) s3Client() *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(n.s3), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(rootUser, rootPassword, ""),
		Retryer:     aws.NopRetryer{}, DisableLogOutputChecksumValidationSkipped: true,
	})
}

// browser starts a fresh headless Chromium (its own profile directory)
// and returns a context driving one tab; cleanup closes the browser.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromePath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancel()
		cancelAlloc()
		t.Fatalf("start chromium %s: %v", chromePath, err)
	}
	t.Cleanup(func() {
		cancel()      // closes the tab and the browser
		cancelAlloc() // waits for the process to exit
	})
	return ctx
}

// run runs browser actions with a deadline so a missing element fails the
// test instead of hanging it.
func run(t *testing.T, ctx context.Context, what string, steps ...step) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var err error
	for i, st := range steps {
		if err = chromedp.Do(c, st); err != nil {
			err = fmt.Errorf("step %d of %d: %w", i+1, len(steps), err)
			break
		}
	}
	if err != nil {
		var loc, body string
		lc, lcancel := context.WithTimeout(ctx, 5*time.Second)
		_ = chromedp.Do(lc, into(&loc, chromedp.Location()), into(&body, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ''`)))
		lcancel()
		t.Fatalf("%s: %v\nat %s, page text:\n%s", what, err, loc, body)
	}
}

// screenshot saves the page as DIR/name.png when
// TERRACE_CONSOLE_SCREENSHOTS=DIR is set.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("TERRACE_CONSOLE_SCREENSHOTS")
	if dir == "" {
		return
	}
	var png []byte
	run(t, ctx, "screenshot "+name, into(&png, chromedp.FullScreenshot(100)))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// login fills the login form.
func login(t *testing.T, ctx context.Context, n *node, access, secret string) {
	t.Helper()
	run(t, ctx, "open the login page",
		chromedp.Navigate(n.admin+"/console/login"),
		chromedp.WaitVisible(css(`#login-form`)),
		chromedp.SetValue(css(`#access_key`), access),
		chromedp.SetValue(css(`#secret_key`), secret),
		chromedp.Click(css(`#login-submit`)),
	)
}

// step is a browser action whose value, if any, was stored by into.
type step = chromedp.Action[chromedp.Void]

func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// into runs a valued action and stores its value in dst.
func into[T any](dst *T, a chromedp.Action[T]) step {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, tg)
		if err == nil {
			*dst = v
		}
		return chromedp.Void{}, err
	}
}

// readAll drains and closes a body.
func readAll(rc io.ReadCloser) string {
	defer rc.Close()
	b, _ := io.ReadAll(bufio.NewReader(rc))
	return strings.TrimSpace(string(b))
}
