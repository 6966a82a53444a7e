package main

import (
	"fmt"
	"net/http"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/lifecycle"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) {
		for _, c := range root.Commands() {
			if c.Name() == "tier" {
				c.AddCommand(newTierLifecycleCmd(g))
			}
		}
	})
}

func newTierLifecycleCmd(g *globalFlags) *cobra.Command {
	var run bool
	cmd := &cobra.Command{
		Use:   "lifecycle",
		Short: "S3 lifecycle rules: bytes pending by rule (transitions, expirations), or run them now",
		Long: `Show, per bucket and lifecycle rule, what the rules would do right now
(objects and bytes to transition to another storage class — i.e. to move to
the tiers of that class's replication vector — or to expire, and incomplete
multipart uploads to abort), and what waits for a later day with the next
due time. Nothing changes unless --run is given, which applies the rules at
once instead of waiting for the runner's next pass.

Rules are set with PutBucketLifecycleConfiguration, e.g.
  aws s3api put-bucket-lifecycle-configuration --bucket logs --lifecycle-configuration file://rules.json`,
		Example: `  terrace tier lifecycle
  terrace tier lifecycle --run --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep lifecycle.RunReport
			var err error
			if run {
				err = g.client().callJSON(http.MethodPost, "/v1/lifecycle/run", nil, &rep)
			} else {
				err = g.client().getJSON("/v1/lifecycle/report", nil, &rep)
			}
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			what := "PENDING NOW"
			if run {
				what = "DONE"
			}
			fmt.Fprintf(w, "BUCKET\tRULE\t%s: TRANSITION\tTO\tEXPIRE\tABORT UPLOADS\tWAITING\tNEXT DUE\n", what)
			for _, r := range rep.Rules {
				fmt.Fprintf(w, "%s\t%s\t%d (%s)\t%v\t%d (%s)\t%d\t%d (%s)\t%s\n", r.Bucket, r.Rule,
					r.Transition, humanBytes(r.TransitionBytes), r.TransitionClasses, r.Expire, humanBytes(r.ExpireBytes),
					r.AbortUploads, r.Waiting, humanBytes(r.WaitingBytes), r.NextDue)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\n%d buckets with rules, %d objects scanned", rep.Buckets, rep.Scanned)
			if run {
				fmt.Fprintf(cmd.OutOrStdout(), "; transitioned %d, expired %d, aborted %d uploads, skipped %d (changed meanwhile)",
					rep.Transitioned, rep.Expired, rep.Aborted, rep.Skipped)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().BoolVar(&run, "run", false, "apply the rules now")
	return cmd
}
