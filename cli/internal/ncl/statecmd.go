package ncl

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// ExitHeld: apply made every change it could, and some were held for
// approval (they are not applied until approved).
const ExitHeld = 3

func (a *app) exportCmd() *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the administered state as YAML (groups, destinations, policies, roles, users, catalog, chats, wirings, members, model providers and prices)",
		Long: `Write the administered state as one YAML document for review and for
"ncl apply": users, groups (cli scope, base image, pinned host, packages, MCP servers, model
providers, rules, default and budget), destinations (to a group or a chat), message policies,
roles, catalog action settings, messaging groups (chats), wirings, group members, and the
model gateway's providers and prices — by name,
in a stable order, without server-made ids or times, so a change to it reads
as a diff in a pull request.

Secrets are write-only: an MCP server's env values and a model provider's
credential are written as <redacted>, which apply reads as "keep the value the
server holds" (set a value by writing it). -f writes the file readable by its
owner only (0600).`,
		Example: "  ncl export > clawguard.yaml\n  ncl export | ncl apply -f - --dry-run",
		Args:    none,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "write to this file instead of standard output")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			s, _, err := readState(ctx, c)
			if err != nil {
				return err
			}
			out, err := s.yaml()
			if err != nil {
				return err
			}
			if file == "" {
				_, err = a.stdout.Write(out)
				return err
			}
			// Only its owner reads it: the administered state (who may
			// approve what, where every secret goes) is nobody else's.
			return writePrivate(file, out)
		})
	}
	return cmd
}

func (a *app) applyCmd() *cobra.Command {
	var (
		file          string
		dryRun, prune bool
	)
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Make the server's state what a YAML document (ncl export's format) says",
		Long: `Make the server's state what the document says: create what is missing,
change what differs, and with --prune delete what the document does not list
(users are never deleted). Idempotent: applying the same document twice changes
nothing the second time. --dry-run prints the changes and makes none.

Every change is the admin command it always is, checked as the caller: a change
that needs approval is held, apply says which hold, and exits 3 once the rest
is done. Unknown fields are refused with their line.`,
		Example: "  ncl apply -f clawguard.yaml --dry-run\n  ncl apply -f clawguard.yaml\n  ncl export | ncl apply -f - --dry-run",
		Args:    none,
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "the document (- = standard input)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print the changes, make none")
	cmd.Flags().BoolVar(&prune, "prune", false, "also delete what the document does not list")
	required(cmd, "file")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		var in io.Reader = cmd.InOrStdin()
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return usagef("--file: %v", err)
			}
			defer f.Close()
			in = f
		}
		want, err := parseState(in)
		if err != nil {
			return usagef("%s: %v", file, err)
		}
		want.sort()
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			cur, book, err := readState(ctx, c)
			if err != nil {
				return err
			}
			changes, left := plan(cur, want, prune)
			for _, l := range left {
				fmt.Fprintf(a.stdout, "  not deleted without --prune: %s\n", l)
			}
			if len(changes) == 0 {
				fmt.Fprintln(a.stdout, "No changes.")
				return nil
			}
			var held []string
			for _, ch := range changes {
				if dryRun {
					fmt.Fprintln(a.stdout, ch)
					continue
				}
				if err := ch.run(ctx, c, book); err != nil {
					if hold, ok := heldAs(err); ok {
						fmt.Fprintf(a.stdout, "%s — held for approval as %s\n", ch, hold)
						held = append(held, hold)
						continue
					}
					return fmt.Errorf("%s: %w", ch, err)
				}
				fmt.Fprintln(a.stdout, ch)
			}
			if dryRun {
				fmt.Fprintf(a.stdout, "%d change(s); none made (--dry-run).\n", len(changes))
				return nil
			}
			if len(held) > 0 {
				return exitError{code: ExitHeld, msg: fmt.Sprintf("%d change(s) held for approval (%v); the rest applied", len(held), held)}
			}
			return nil
		})
	}
	return cmd
}
