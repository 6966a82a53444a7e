package main

import (
	"os"

	"github.com/spf13/cobra"
)

const defaultEndpoint = "http://127.0.0.1:9001"

type globalFlags struct {
	endpoint  string
	accessKey string
	secretKey string
	caCert    string
	json      bool
}

// firstEnv returns the first non-empty environment variable of names.
func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "terrace",
		Short: "Terrace: a self-managing, tiered, distributed object store",
		Long: `Terrace stores S3 objects on tiered media (mem, ssd, hdd, remote) and keeps
them safe, fast and cheap by itself: placement weighs fullness, load, tiers
and failure domains; every object carries a replication vector (e.g.
ssd=1,hdd=2) saying how many replicas live on which tier.

Start a node with 'terrace server' (with no flags it runs a demo node with
emulated mem/ssd/hdd tiers under ./terrace-data), then talk to it with any S3
client on 127.0.0.1:9000 or with the commands below, which reach the node's
admin API (--endpoint, $TERRACE_ENDPOINT, default ` + defaultEndpoint + `).

The admin API accepts only requests signed with an admin's keys (AWS SigV4):
set TERRACE_ACCESS_KEY and TERRACE_SECRET_KEY (or AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY, or --access-key/--secret-key) to the root account's
keys (the demo node prints them) or an admin user's.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	ep := os.Getenv("TERRACE_ENDPOINT")
	if ep == "" {
		ep = defaultEndpoint
	}
	root.PersistentFlags().StringVar(&g.endpoint, "endpoint", ep, "admin API of the node to talk to ($TERRACE_ENDPOINT)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON instead of tables")
	root.PersistentFlags().StringVar(&g.accessKey, "access-key", firstEnv("TERRACE_ACCESS_KEY", "AWS_ACCESS_KEY_ID"),
		"admin access key signing admin API requests ($TERRACE_ACCESS_KEY, else $AWS_ACCESS_KEY_ID)")
	root.PersistentFlags().StringVar(&g.secretKey, "secret-key", firstEnv("TERRACE_SECRET_KEY", "AWS_SECRET_ACCESS_KEY"),
		"admin secret key ($TERRACE_SECRET_KEY, else $AWS_SECRET_ACCESS_KEY)")
	root.PersistentFlags().StringVar(&g.caCert, "ca-cert", os.Getenv("TERRACE_CA_CERT"),
		"PEM CA that signed an https:// endpoint's certificate ($TERRACE_CA_CERT)")
	root.AddCommand(
		newServerCmd(),
		newTierCmd(g),
		newObjectCmd(g),
		newBucketCmd(g),
		newPutCmd(g), newGetCmd(g), newLsCmd(g), newRmCmd(g),
		newStatusCmd(g),
		newVersionCmd(),
	)
	addExtraCommands(root, g)
	return root
}

// extraCommands are registered by other files (bench, placement, sim) so
// that each subsystem's CLI lives next to its wiring.
var extraCommands []func(root *cobra.Command, g *globalFlags)

func addExtraCommands(root *cobra.Command, g *globalFlags) {
	for _, f := range extraCommands {
		f(root, g)
	}
}

var version = "dev"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { cmd.Println("terrace", version) },
	}
}
