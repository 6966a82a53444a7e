package main

import (
	"fmt"
	"net/http"
	"net/url"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/terrace-storage/terrace/internal/users"
)

func init() {
	extraCommands = append(extraCommands, func(root *cobra.Command, g *globalFlags) { root.AddCommand(newUserCmd(g)) })
}

func newUserCmd(g *globalFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage S3 users (access keys, admin role)",
		Long: `Manage the S3 users besides the root account. Users live in the metadata
store, so every node of a cluster sees a change at once. A user's name is its
identity: bucket owner, ACL grantee ID and bucket-policy principal
("Principal": {"AWS": ["alice"]}); its access key and secret are generated and
printed once — Terrace stores the secret only sealed with the master key and
cannot show it again. Admin users bypass ACLs and bucket policies, like root.`,
	}
	var admin bool
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a user and print its generated keys",
		Example: `  terrace user add alice
  terrace user add ops --admin
  terrace user add ci --json    # {"name": ..., "access_key": ..., "secret_key": ...}`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := url.Values{}
			if admin {
				q.Set("admin", "1")
			}
			var c users.Credentials
			if err := g.client().callJSON(http.MethodPost, "/v1/users/"+url.PathEscape(args[0]), q, &c); err != nil {
				return err
			}
			return printCredentials(cmd, g, c, "created")
		},
	}
	add.Flags().BoolVar(&admin, "admin", false, "make the user an administrator (bypasses ACLs and policies)")
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List users (names, access keys, roles; never secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var all []users.User
			if err := g.client().getJSON("/v1/users", nil, &all); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), all)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 2, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tACCESS KEY\tROLE\tCREATED")
			for _, u := range all {
				role := "user"
				if u.Admin {
					role = "admin"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", u.Name, u.AccessKey, role, u.Created.Format("2006-01-02 15:04:05"))
			}
			return w.Flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a user; its keys stop working at once (its buckets keep it as owner)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := g.client().callJSON(http.MethodDelete, "/v1/users/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			if g.json {
				return printJSON(cmd.OutOrStdout(), map[string]string{"name": args[0], "status": "removed"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "user %s removed\n", args[0])
			return nil
		},
	}
	keys := &cobra.Command{Use: "keys", Short: "Manage a user's keys"}
	keys.AddCommand(&cobra.Command{
		Use:   "rotate NAME",
		Short: "Replace a user's access key and secret; the old ones stop working at once",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var c users.Credentials
			if err := g.client().callJSON(http.MethodPost, "/v1/users/"+url.PathEscape(args[0])+"/keys/rotate", nil, &c); err != nil {
				return err
			}
			return printCredentials(cmd, g, c, "rotated")
		},
	})
	cmd.AddCommand(add, ls, rm, keys)
	return cmd
}

func printCredentials(cmd *cobra.Command, g *globalFlags, c users.Credentials, what string) error {
	if g.json {
		return printJSON(cmd.OutOrStdout(), map[string]string{"name": c.Name, "access_key": c.AccessKey, "secret_key": c.SecretKey})
	}
	fmt.Fprintf(cmd.OutOrStdout(), `user %s %s
  access key:  %s
  secret key:  %s
The secret is shown only now; store it safely.
`, c.Name, what, c.AccessKey, c.SecretKey)
	return nil
}
