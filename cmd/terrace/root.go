package main

import (
	"os"

	"github.com/spf13/cobra"
)

const defaultEndpoint = "http://127.0.0.1:9001"

type globalFlags struct {
	endpoint string
	json     bool
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
admin API (--endpoint, $TERRACE_ENDPOINT, default ` + defaultEndpoint + `).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	ep := os.Getenv("TERRACE_ENDPOINT")
	if ep == "" {
		ep = defaultEndpoint
	}
	root.PersistentFlags().StringVar(&g.endpoint, "endpoint", ep, "admin API of the node to talk to ($TERRACE_ENDPOINT)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print machine-readable JSON instead of tables")
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
