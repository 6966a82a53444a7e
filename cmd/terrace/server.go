package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/placement"
	"github.com/terrace-storage/terrace/internal/server"
)

// s3Starter is set by s3.go once the gateway is linked in.
var s3Starter server.S3Starter

func newServerCmd() *cobra.Command {
	var cfgPath string
	var flagCfg server.Config
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a Terrace node (S3 gateway, admin API, storage)",
		Long: `Run a Terrace node.

Configuration comes from a YAML file (--config), then TERRACE_* environment
variables, then flags; flags win. With no devices configured the node runs
the demo layout: a 256 MiB mem device, a 2 GiB ssd and two 8 GiB hdd devices
under --data-dir, with emulation profiles that make them behave like real
media (hdd ≈ 150 MB/s and 4 ms per op, ssd ≈ 500 MB/s and 0.1 ms).

A device is tier:path:capacity[:profile]; a mem device has no path.

The root keys default to the published demo keys terrace/terrace-secret,
accepted only while the S3 and admin addresses are on loopback: elsewhere
set TERRACE_ROOT_PASSWORD (--insecure-default-credentials overrides this
for throw-away demos). The banner prints the secret only when it is the
demo default.

Cluster mode: give every node the same --initial-cluster (the founding etcd
members, normally 3 or 5 of the nodes), a --cluster-secret, and its own
--rpc-address; members also need --etcd-peer-url and --etcd-client-url.
Nodes not in --initial-cluster (or all nodes, with an external etcd) use
--meta-endpoints. 'terrace dev cluster' does all of this on one machine.`,
		Example: `  # demo node with emulated tiers under ./terrace-data
  terrace server

  # real devices, no emulation
  terrace server --data-dir /var/lib/terrace \
    --device ssd:/data/ssd0:400GiB --device hdd:/data/hdd0:8TiB --device hdd:/data/hdd1:8TiB \
    --default-vector ssd=1,hdd=1

  # then, with any S3 client:
  AWS_ACCESS_KEY_ID=terrace AWS_SECRET_ACCESS_KEY=terrace-secret \
    aws --endpoint-url http://127.0.0.1:9000 s3 mb s3://demo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg := server.Config{}
			if cfgPath != "" {
				c, err := server.LoadFile(cfgPath)
				if err != nil {
					return err
				}
				cfg = c
			}
			cfg.ApplyEnv(os.Getenv)
			f := cmd.Flags()
			if f.Changed("node-id") {
				cfg.NodeID = flagCfg.NodeID
			}
			if f.Changed("rack") {
				cfg.Rack = flagCfg.Rack
			}
			if f.Changed("data-dir") {
				cfg.DataDir = flagCfg.DataDir
			}
			if f.Changed("s3-address") {
				cfg.S3Address = flagCfg.S3Address
			}
			if f.Changed("admin-address") {
				cfg.AdminAddress = flagCfg.AdminAddress
			}
			if f.Changed("device") {
				cfg.Devices = flagCfg.Devices
			}
			if f.Changed("emulate") {
				cfg.Emulate = flagCfg.Emulate
			}
			if f.Changed("default-vector") {
				cfg.DefaultVector = flagCfg.DefaultVector
			}
			if f.Changed("placement") {
				cfg.Placement = flagCfg.Placement
			}
			if f.Changed("initial-cluster") {
				cfg.InitialCluster = flagCfg.InitialCluster
			}
			if f.Changed("etcd-peer-url") {
				cfg.EtcdPeerURL = flagCfg.EtcdPeerURL
			}
			if f.Changed("etcd-client-url") {
				cfg.EtcdClientURL = flagCfg.EtcdClientURL
			}
			if f.Changed("meta-endpoints") {
				cfg.MetaEndpoints = flagCfg.MetaEndpoints
			}
			if f.Changed("rpc-address") {
				cfg.RPCAddress = flagCfg.RPCAddress
			}
			if f.Changed("cluster-secret") {
				cfg.ClusterSecret = flagCfg.ClusterSecret
			}
			if f.Changed("tls-cert") {
				cfg.TLSCert = flagCfg.TLSCert
			}
			if f.Changed("tls-key") {
				cfg.TLSKey = flagCfg.TLSKey
			}
			if f.Changed("tls-ca") {
				cfg.TLSCA = flagCfg.TLSCA
			}
			if f.Changed("insecure-default-credentials") {
				cfg.InsecureDefaultCredentials = flagCfg.InsecureDefaultCredentials
			}
			if f.Changed("admin-public") {
				cfg.AdminPublic = flagCfg.AdminPublic
			}
			if f.Changed("log-level") {
				cfg.LogLevel = flagCfg.LogLevel
			}
			applyServerHookFlags(f, flagCfg, &cfg)
			cfg.EnsureDefaults()
			log := newLogger(cfg.LogLevel)
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			node, err := server.Open(ctx, cfg, log)
			if err != nil {
				return err
			}
			defer node.Close()
			server.ApplyRuntime(cfg, log) // validated by Open
			printBanner(cmd.OutOrStdout(), cfg, node.ConsoleURL())
			err = node.Serve(ctx, s3Starter)
			log.Info("shutting down")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "YAML configuration file")
	f.StringVar(&flagCfg.NodeID, "node-id", "n1", "node ID")
	f.StringVar(&flagCfg.Rack, "rack", "r1", "rack / failure domain")
	f.StringVar(&flagCfg.DataDir, "data-dir", "terrace-data", "directory for metadata and default devices")
	f.StringVar(&flagCfg.S3Address, "s3-address", server.DefaultS3Address, "S3 listen address")
	f.StringVar(&flagCfg.AdminAddress, "admin-address", server.DefaultAdminAddress, "admin API listen address (keep it on loopback)")
	f.StringArrayVar(&flagCfg.Devices, "device", nil, "device tier:path:capacity[:profile] (repeatable), e.g. ssd:/data/ssd0:20GiB, mem::2GiB")
	f.BoolVar(&flagCfg.Emulate, "emulate", false, "apply tier emulation profiles to devices that name none")
	f.StringVar(&flagCfg.DefaultVector, "default-vector", "any=2", "replication vector for buckets without one, e.g. ssd=1,hdd=1")
	f.StringVar(&flagCfg.Placement, "placement", server.DefaultPlacement, "write placement policy ("+strings.Join(placement.Names, ", ")+") with optional parameters, e.g. \"fitness selection=sus\"")
	f.StringVar(&flagCfg.LogLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&flagCfg.TLSCert, "tls-cert", "", "PEM certificate: S3, admin API, replica RPC and etcd speak TLS ($TERRACE_TLS_CERT)")
	f.StringVar(&flagCfg.TLSKey, "tls-key", "", "PEM private key of --tls-cert ($TERRACE_TLS_KEY)")
	f.StringVar(&flagCfg.TLSCA, "tls-ca", "", "cluster CA (PEM): peers must present certificates from it (mutual TLS) ($TERRACE_TLS_CA)")
	f.BoolVar(&flagCfg.InsecureDefaultCredentials, "insecure-default-credentials", false,
		"DEMOS ONLY: start with the published demo root password (no TERRACE_ROOT_PASSWORD) although the S3 or admin address is not on loopback ($TERRACE_INSECURE_DEFAULT_CREDENTIALS)")
	f.StringSliceVar(&flagCfg.AdminPublic, "admin-public", nil, "admin endpoints served without a signature: metrics, health ($TERRACE_ADMIN_PUBLIC)")
	f.StringVar(&flagCfg.InitialCluster, "initial-cluster", "", "cluster mode: founding etcd members name=peerURL,... (a node named here runs one)")
	f.StringVar(&flagCfg.EtcdPeerURL, "etcd-peer-url", "", "this node's etcd peer URL, e.g. http://10.0.0.1:2380")
	f.StringVar(&flagCfg.EtcdClientURL, "etcd-client-url", "", "this node's etcd client URL, e.g. http://10.0.0.1:2379")
	f.StringSliceVar(&flagCfg.MetaEndpoints, "meta-endpoints", nil, "cluster mode with an external etcd: its client URLs")
	f.StringVar(&flagCfg.RPCAddress, "rpc-address", "", "cluster mode: node-to-node replica RPC listen address")
	f.StringVar(&flagCfg.ClusterSecret, "cluster-secret", "", "cluster mode: shared secret authenticating peers ($TERRACE_CLUSTER_SECRET)")
	addServerHookFlags(f, &flagCfg)
	return cmd
}

// printBanner tells the operator where the node serves. It prints the root
// secret only when it is the published demo default, saying so; a password
// the operator chose stays out of stdout (journald, docker logs).
func printBanner(w io.Writer, cfg server.Config, consoleURL string) {
	scheme, caHint := "http", ""
	if cfg.TLSCert != "" {
		scheme = "https"
		if cfg.TLSCA != "" {
			caHint = fmt.Sprintf(" --ca-bundle %s", cfg.TLSCA)
		}
	}
	secret, exportSecret, warning := "the configured root password", "<root password>", ""
	if cfg.DefaultPassword() {
		secret, exportSecret = fmt.Sprintf("secret key %q", cfg.RootPassword), cfg.RootPassword
		warning = "  The secret key is the published demo default: set TERRACE_ROOT_PASSWORD for anything but a demo.\n"
	}
	fmt.Fprintf(w, `Terrace node %s is up.
  S3 endpoint:  %s://%s   (access key %q, %s)
  Admin API:    %s://%s   (signed with the same keys)
  Console:      %s   (log in with the same keys)
  Data dir:     %s
%s  Try:  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s
        aws --endpoint-url %s://%s%s s3 ls
        terrace tier report
`, cfg.NodeID, scheme, cfg.S3Address, cfg.RootUser, secret, scheme, cfg.AdminAddress, consoleURL, cfg.DataDir,
		warning, cfg.RootUser, exportSecret, scheme, cfg.S3Address, caHint)
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	switch strings.ToLower(level) {
	case "debug":
		l = slog.LevelDebug
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}
