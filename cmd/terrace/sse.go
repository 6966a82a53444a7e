package main

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/server"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) { root.AddCommand(newSSECmd(g)) })
}

func newSSECmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{Use: "sse", Short: "Server-side encryption: master key rotation"}
	cmd.AddCommand(&cobra.Command{
		Use:   "rewrap",
		Short: "Re-seal user secrets and SSE-S3 data keys with the active master key",
		Long: `After a master-key rotation (a new ID:BASE64KEY line first in the keyring,
the old lines kept, nodes restarted), re-seal every user secret and every
SSE-S3 object data key that is still sealed with an older key — current
objects, noncurrent versions, and the records snapshots and clones still
read. Object bytes
are not rewritten. When it reports zero left and no multipart upload started
before the rotation is still open, the old lines can be removed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var rep server.RewrapReport
			if err := g.client().callJSON(http.MethodPost, "/v1/sse/rewrap", nil, &rep); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), rep)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "active key %s: re-sealed %d user secrets, %d object keys (%d objects scanned) and %d history keys (%d noncurrent versions and snapshot records scanned)\n",
				rep.ActiveKey, rep.Users, rep.Objects, rep.Scanned, rep.History, rep.HistoryScanned)
			return nil
		},
	})
	return cmd
}
