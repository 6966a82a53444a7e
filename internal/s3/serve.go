package s3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/versity/versitygw/auth"
	"github.com/versity/versitygw/debuglogger"
	"github.com/versity/versitygw/embedgw"
	"github.com/versity/versitygw/s3api"
	"github.com/versity/versitygw/s3api/middlewares"
)

// ServeConfig configures Serve. Zero values mean defaults.
type ServeConfig struct {
	// Address is the S3 listen address, host:port. Default 127.0.0.1:9000.
	Address string
	// RootUser and RootPassword are the root account's access key and
	// secret. Required.
	RootUser     string
	RootPassword string
	// Region is reported to clients and used in signatures. Default
	// us-east-1.
	Region string
	// HealthPath answers unauthenticated GETs with 200 for load balancers
	// and readiness probes. Default /-/health ("-" is not a valid bucket
	// name, so no bucket is masked by it).
	HealthPath string
	// MaxConnections bounds concurrent TCP connections and MaxRequests
	// in-flight requests. 1024 each: far above what one node's devices
	// serve concurrently (each write holds an open egroup, and
	// object.Options.MaxOpenEgroups defaults to 64), while bounding memory
	// under a connection flood.
	MaxConnections int
	MaxRequests    int
	// VirtualDomain, when set, also enables virtual-hosted-style requests
	// (<bucket>.<VirtualDomain>). Path style always works.
	VirtualDomain string
	// Debug turns on versitygw's request/response debug log (secrets
	// masked) on stderr. Off by default: Serve is quiet.
	Debug bool
	// CertFile and KeyFile, when set, make the gateway speak HTTPS only.
	CertFile string
	KeyFile  string
	// Ready, if not nil, is closed once the gateway answers on Address.
	Ready chan<- struct{}
	// IAM, if not nil, resolves access keys to accounts (users in the
	// metadata store); nil means the root account only.
	IAM auth.IAMService
}

// EnsureDefaults fills zero fields.
func (c *ServeConfig) EnsureDefaults() {
	if c.Address == "" {
		c.Address = "127.0.0.1:9000"
	}
	if c.Region == "" {
		c.Region = "us-east-1"
	}
	if c.HealthPath == "" {
		c.HealthPath = "/-/health"
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 1024
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = c.MaxConnections
	}
}

// Validate rejects bad configurations.
func (c *ServeConfig) Validate() error {
	if c.RootUser == "" || c.RootPassword == "" {
		return errors.New("s3: root user and password are required")
	}
	if _, _, err := net.SplitHostPort(c.Address); err != nil {
		return fmt.Errorf("s3: address %q: %w", c.Address, err)
	}
	if !strings.HasPrefix(c.HealthPath, "/") {
		return fmt.Errorf("s3: health path %q must start with /", c.HealthPath)
	}
	if c.MaxConnections < 1 || c.MaxRequests < 1 || c.MaxRequests > c.MaxConnections {
		return fmt.Errorf("s3: need 1 <= max requests (%d) <= max connections (%d)", c.MaxRequests, c.MaxConnections)
	}
	return nil
}

// String prints the configuration without secrets.
func (c ServeConfig) String() string {
	return fmt.Sprintf("address=%s region=%s root_user=%s health=%s max_connections=%d max_requests=%d virtual_domain=%q",
		c.Address, c.Region, c.RootUser, c.HealthPath, c.MaxConnections, c.MaxRequests, c.VirtualDomain)
}

// Serve runs versitygw's S3 gateway over be until ctx is done, then shuts
// it down and returns nil. It returns an error if the gateway cannot start
// (bad configuration, address in use) or fails. Only one Serve may run in
// a process at a time (an embedgw limit).
func Serve(ctx context.Context, be *Backend, cfg ServeConfig) error {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	// Fail fast with a clear error if the address is taken; versitygw
	// would report it only after starting its other subsystems.
	ln, err := net.Listen("tcp", cfg.Address)
	if err != nil {
		return fmt.Errorf("s3: listen %s: %w", cfg.Address, err)
	}
	ln.Close()

	level := debuglogger.LevelSilent
	if cfg.Debug {
		level = debuglogger.LevelDebug
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if cfg.Ready != nil {
		scheme := "http://"
		if cfg.CertFile != "" {
			scheme = "https://"
		}
		go waitReady(gctx, scheme+cfg.Address+cfg.HealthPath, cfg.Ready)
	}
	var iam auth.IAMService = newRootOnlyIAM(cfg.RootUser, cfg.RootPassword)
	if cfg.IAM != nil {
		iam = cfg.IAM
	}
	be.iam, be.rootUser, be.virtualDomain = iam, cfg.RootUser, cfg.VirtualDomain
	if si, ok := iam.(*StoreIAM); ok {
		si.owner = be.ownerOf
		// A user name still owned by or named in a bucket cannot be
		// taken by a new user (users.ErrNameInUse).
		si.store.SetNameInUse(be.nameInUse)
	}
	env := routeEnv{be: be, root: middlewares.RootUserConfig{Access: cfg.RootUser, Secret: cfg.RootPassword}, iam: iam, region: cfg.Region}
	opts := []s3api.Option{s3api.WithMiddleware("/", be.drainRefused()), s3api.WithMiddleware("/", be.publicAccessGate()),
		s3api.WithMiddleware("/", env.spoolChunked()), s3api.WithMiddleware("/", env.copySourceCheck()),
		s3api.WithMiddleware("/", be.aclResponses())}
	opts = append(opts, env.expectOptions(be.log)...)
	for _, r := range be.routes(env) {
		opts = append(opts, env.option(r))
	}
	err = embedgw.RunVersityGW(gctx, be, &embedgw.Config{
		RootUserAccess:    cfg.RootUser,
		RootUserSecret:    cfg.RootPassword,
		IAMService:        iam,
		S3Options:         opts,
		Region:            cfg.Region,
		Ports:             []string{cfg.Address},
		MaxConnections:    cfg.MaxConnections,
		MaxRequests:       cfg.MaxRequests,
		MultipartMaxParts: 10000, // S3's limit; the object layer's too
		HealthPath:        cfg.HealthPath,
		VirtualDomain:     cfg.VirtualDomain,
		LogLevel:          level,
		Quiet:             true,
		KeepAlive:         true,
		CertFile:          cfg.CertFile,
		KeyFile:           cfg.KeyFile,
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("gateway stopped")
	}
	return fmt.Errorf("s3: %w", err)
}

// rootOnlyIAM is versitygw's single-account IAM (the one it would pick
// itself, built here so that it does not announce itself on stdout), except
// that an unknown access key is AWS's 403 InvalidAccessKeyId rather than
// the admin API's 404 XAdminUserNotFound.
type rootOnlyIAM struct {
	auth.IAMService
	root string
}

func newRootOnlyIAM(user, password string) rootOnlyIAM {
	return rootOnlyIAM{
		IAMService: auth.NewIAMServiceSingle(auth.Account{Access: user, Secret: password, Role: auth.RoleAdmin}),
		root:       user,
	}
}

// GetUserAccount returns the root account or auth.ErrNoSuchUser, which
// versitygw's authentication answers with InvalidAccessKeyId.
func (r rootOnlyIAM) GetUserAccount(access string) (auth.Account, error) {
	if access != r.root {
		return auth.Account{}, auth.ErrNoSuchUser
	}
	return r.IAMService.GetUserAccount(access)
}

// waitReady closes ready once url answers 200.
func waitReady(ctx context.Context, url string, ready chan<- struct{}) {
	// Readiness of our own listener: the certificate is checked by clients.
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probing our own port
	for ctx.Err() == nil {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				close(ready)
				return
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// routes are the bucket sub-resource operations Terrace serves itself
// (see routes.go).
func (b *Backend) routes(e routeEnv) []bucketRoute {
	return append(append(b.bucketEncryptionRoutes(e), b.lifecycleRoutes()...), b.publicAccessBlockRoutes()...)
}
