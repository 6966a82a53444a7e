package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/devcluster"
)

func init() {
	extraCommands = append(extraCommands,
		func(root *cobra.Command, _ *globalFlags) { root.AddCommand(newDevCmd()) },
		func(root *cobra.Command, g *globalFlags) { root.AddCommand(newNodeCmd(g)) },
	)
}

func newDevCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "dev", Short: "Developer tools: local clusters"}
	var o devcluster.Options
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Run an N-node Terrace on loopback (embedded etcd, emulated tiers)",
		Long: `Start N 'terrace server' processes on 127.0.0.1, each with its own data
directory, devices and ports, the first 3 (or 5) running embedded etcd members,
all sharing a generated cluster secret. Prints every node's endpoints and keeps
running until interrupted; then stops the nodes. Re-running on the same --dir
restarts the same cluster with its data.

Ports: node i (from 0) uses base+10i: +0 S3, +1 admin, +2 replica RPC,
+3 etcd client, +4 etcd peer. cluster.json in --dir records it all.`,
		Example: `  terrace dev cluster --nodes 3
  terrace dev cluster --nodes 5 --racks 2 --dir /tmp/t5 --base-port 9200
  terrace dev cluster --tls          # https:// endpoints, mutual TLS between nodes
  TERRACE_ENDPOINT=http://127.0.0.1:9101 terrace status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				o.Binary = exe
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.ErrOrStderr(), "starting %d nodes under %s ...\n", o.Nodes, o.Dir)
			cl, err := devcluster.Start(ctx, o)
			if err != nil {
				return err
			}
			defer cl.Stop()
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NODE\tRACK\tS3\tADMIN\tRPC\tETCD MEMBER\tLOG")
			sch := cl.Scheme()
			for _, n := range cl.Nodes {
				fmt.Fprintf(w, "%s\t%s\t%s://%s\t%s://%s\t%s\t%v\t%s\n", n.ID, n.Rack, sch, n.S3, sch, n.Admin, n.RPC, n.Member, n.LogPath)
			}
			w.Flush()
			caEnv := ""
			if cl.CAFile != "" {
				caEnv = "TERRACE_CA_CERT=" + cl.CAFile + " "
				fmt.Fprintf(cmd.OutOrStdout(), "\nTLS everywhere; node-to-node and etcd traffic is mutual TLS. Cluster CA: %s (aws --ca-bundle %s)\n", cl.CAFile, cl.CAFile)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nKeys (S3 and admin API): %s / %s.\nTry: export TERRACE_ACCESS_KEY=%s TERRACE_SECRET_KEY=%s; %sTERRACE_ENDPOINT=%s://%s terrace status\nCtrl-C stops the cluster.\n",
				devcluster.AccessKey, devcluster.SecretKey, devcluster.AccessKey, devcluster.SecretKey, caEnv, sch, cl.Nodes[0].Admin)
			<-ctx.Done()
			fmt.Fprintln(cmd.ErrOrStderr(), "stopping ...")
			return nil
		},
	}
	f := c.Flags()
	f.IntVar(&o.Nodes, "nodes", 3, "number of nodes")
	f.IntVar(&o.Racks, "racks", 1, "number of racks (nodes are spread round-robin)")
	f.StringVar(&o.Dir, "dir", "terrace-dev", "directory for every node's data and logs")
	f.IntVar(&o.BasePort, "base-port", 9100, "first port; node i uses base+10i .. base+10i+4")
	f.BoolVar(&o.Emulate, "emulate", true, "emulate tier speeds (hdd ≈ 150 MB/s, 4 ms; ssd ≈ 500 MB/s, 0.1 ms)")
	f.StringVar(&o.DefaultVector, "default-vector", "any=2", "default replication vector")
	f.StringArrayVar(&o.Devices, "device", nil, "per-node device tier:name:capacity (repeatable; default ssd 2GiB + 2 × hdd 8GiB)")
	f.StringVar(&o.Binary, "binary", "", "terrace binary to run (default: this one)")
	f.StringArrayVar(&o.ExtraArgs, "server-arg", nil, "extra argument for every node's 'terrace server' (repeatable), e.g. --server-arg=--config=tuning.yaml")
	f.BoolVar(&o.TLS, "tls", false, "generate a throw-away CA under --dir/tls and run every listener with TLS (mutual TLS between nodes)")
	cmd.AddCommand(c)
	return cmd
}

func newNodeCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "node", Short: "Manage cluster nodes"}
	var off, wait bool
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "Start evacuating a node: its devices take no new replicas and the Curator moves its replicas away",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if off {
				q.Set("off", "1")
			}
			c := g.client()
			if err := c.callJSON("POST", "/v1/nodes/"+url.PathEscape(args[0])+"/drain", q, nil); err != nil {
				return err
			}
			state := "draining"
			if off {
				state = "no longer draining"
			} else if wait {
				if err := waitDrained(cmd.Context(), c, newProgress("drain "+args[0], g.json), args[0]); err != nil {
					return err
				}
				state = "drained: it holds no replicas"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "node %s is %s; 'terrace status' shows progress\n", args[0], state)
			return nil
		},
	}
	drain.Flags().BoolVar(&off, "off", false, "stop draining")
	drain.Flags().BoolVar(&wait, "wait", false, "wait until the node holds no replicas (a progress bar on stderr meanwhile)")
	cmd.AddCommand(drain, newProfileCmd(g))
	return cmd
}

// newProfileCmd fetches a Go profile from a node's admin API (signed like
// every admin call), for `go tool pprof`.
func newProfileCmd(g *globalFlags) *cobra.Command {
	var seconds int
	var kind, out string
	c := &cobra.Command{
		Use:   "profile",
		Short: "Save a CPU (or heap, goroutine, mutex, block) profile of the node at --endpoint",
		Long: `Fetch a Go runtime profile from the node's admin API (/debug/pprof) and save
it for 'go tool pprof'. A CPU profile samples for --seconds while you run the
load you want to look at; take one from every node of a cluster at once to see
where an operation's time goes across processes.`,
		Example: `  terrace node profile --seconds 10 --out n1.pprof &
  TERRACE_ENDPOINT=http://127.0.0.1:9111 terrace node profile --seconds 10 --out n2.pprof &
  terrace bench s3 --endpoint http://127.0.0.1:9100 --workload put --size 4KiB -d 10s
  go tool pprof -top n1.pprof`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if seconds <= 0 || seconds > 600 {
				return fmt.Errorf("--seconds %d: want 1..600", seconds)
			}
			path, q := "/debug/pprof/profile", url.Values{"seconds": {fmt.Sprint(seconds)}}
			switch kind {
			case "cpu":
			case "heap", "goroutine", "mutex", "block", "allocs":
				path, q = "/debug/pprof/"+kind, nil
			default:
				return fmt.Errorf("--kind %q: want cpu, heap, allocs, goroutine, mutex or block", kind)
			}
			if out == "" {
				return fmt.Errorf("--out is required (a file for go tool pprof)")
			}
			resp, err := g.client().do("GET", path, q, nil, -1)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			f, err := os.Create(out)
			if err != nil {
				return err
			}
			n, err := io.Copy(f, resp.Body)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("saving the profile: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s profile saved to %s (%d bytes); go tool pprof -top %s\n", kind, out, n, out)
			return nil
		},
	}
	c.Flags().IntVar(&seconds, "seconds", 10, "CPU profile length")
	c.Flags().StringVar(&kind, "kind", "cpu", "cpu, heap, allocs, goroutine, mutex or block")
	c.Flags().StringVar(&out, "out", "", "file to write")
	return c
}
