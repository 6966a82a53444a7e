package main

import (
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	benchcli "github.com/terrace-storage/terrace/internal/bench/cli"
	"github.com/terrace-storage/terrace/internal/server"
)

func init() {
	extraCommands = append(extraCommands,
		func(root *cobra.Command, _ *globalFlags) {
			b := benchcli.Command()
			b.AddCommand(newCuratorExperimentCmd())
			root.AddCommand(b)
		},
		func(root *cobra.Command, g *globalFlags) { root.AddCommand(newPlacementCmd(g)) },
	)
}

func newPlacementCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "placement", Short: "Inspect write placement decisions"}
	var policy string
	var bytes int64
	var seed uint64
	explain := &cobra.Command{
		Use:   "explain",
		Short: "Show every candidate device's scores and the choice for a vector, on the live cluster state",
		Long: `Run the placement policy on the node's current cluster snapshot, exactly as
a new extent group would be placed, and print each candidate device with its
scores (fitness t_u, t_q, f; or the MOOP objectives) and why it was or was
not chosen. Nothing is written.`,
		Example: `  terrace placement explain --vector ssd=1,hdd=2
  terrace placement explain --vector any=2 --policy fitness --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			vec, _ := cmd.Flags().GetString("vector")
			q := url.Values{"vector": {vec}}
			if policy != "" {
				q.Set("policy", policy)
			}
			if bytes > 0 {
				q.Set("bytes", fmt.Sprint(bytes))
			}
			if seed > 0 {
				q.Set("seed", fmt.Sprint(seed))
			}
			var res server.ExplainResponse
			if err := g.client().getJSON("/v1/placement/explain", q, &res); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), res)
			}
			fmt.Fprint(cmd.OutOrStdout(), res.Text)
			if res.Error != "" {
				return fmt.Errorf("%s", res.Error)
			}
			return nil
		},
	}
	explain.Flags().String("vector", "any=2", "replication vector to place")
	explain.Flags().StringVar(&policy, "policy", "", "policy to explain (default: the node's)")
	explain.Flags().Int64Var(&bytes, "bytes", 0, "bytes to place (default: one extent group)")
	explain.Flags().Uint64Var(&seed, "seed", 0, "random seed (default: time)")
	cmd.AddCommand(explain)
	return cmd
}
