package ncl

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

var effectEnum = guardv1.Effect(0).Descriptor()

func (a *app) tokensCmd() *cobra.Command {
	var req guardv1.CreateTokenRequest
	var secretFile string
	var secretOnly bool
	create := &cobra.Command{
		Use: "create", Short: "Create a bearer token (the secret is shown once)",
		Long: `Create a token for a runner, a chat bridge, a user (approver) or another
operator. The secret is printed once and never again; with --secret-file it is
written to that file (mode 0600) instead of the terminal.

What a token speaks for is set here, never by its holder (see SECURITY.md):
a runner token carries the runner id and the host and labels groups are placed
by (--pinned-host of a group names a host or a key=value label); the runner's
registration may narrow them, never widen them. A runner token without --host
and --label serves only unpinned groups. A bridge token speaks for its channel
namespaces (--channel telegram): it asserts only users "telegram:...", routes
only telegram chats, and resolves holds only as such a user.`,
		Example: `  ncl tokens create --kind runner --name host-1 --runner host-1 --host host-1 --label gpu=true --secret-file runner.token
  ncl tokens create --kind runner --name host-2 --runner host-2 --secret-only > runner.token
  ncl tokens create --kind bridge --name telegram --channel telegram --secret-file bridge.token
  ncl tokens create --kind user --name dana --user telegram:dana -o json
  ncl tokens create --kind user --name erin --user telegram:erin --expires-in 90d --secret-file erin.token`,
		Args: none,
	}
	kind := enumVar(create, "kind", principalEnum, "who the token is for")
	create.Flags().StringVar(&req.Name, "name", "", "a name to recognise the token by")
	create.Flags().StringVar(&req.RunnerId, "runner", "", "runner id (kind runner)")
	create.Flags().StringVar(&req.UserId, "user", "", "user id (kind user)")
	create.Flags().StringVar(&req.Host, "host", "", "host the runner is placed as (kind runner; empty: unpinned groups only)")
	create.Flags().StringToStringVar(&req.Labels, "label", nil, "key=value label groups may be pinned by (kind runner; repeatable)")
	create.Flags().StringSliceVar(&req.Channels, "channel", nil, "channel namespace the bridge speaks for, e.g. telegram (kind bridge, repeatable; none: it files holds only)")
	create.Flags().StringVar(&secretFile, "secret-file", "", "write the secret to this file (0600) instead of printing it")
	create.Flags().BoolVar(&secretOnly, "secret-only", false, "print only the secret (for: > file)")
	expiresIn := create.Flags().String("expires-in", "", "refuse the token this long after its creation: 90d, 720h, 30m (at least 1m; default: until revoked)")
	required(create, "kind", "name")
	create.MarkFlagsMutuallyExclusive("secret-file", "secret-only")
	create.RunE = func(cmd *cobra.Command, _ []string) error {
		req.Kind = guardv1.Principal(kind.val)
		if a.quiet && secretFile == "" {
			return usagef("-q prints only the token id, so the secret would be lost: add --secret-file (or use --secret-only)")
		}
		if secretOnly && a.structured() {
			return usagef("--secret-only and -o %s are exclusive", a.output)
		}
		a.userArgs(&req.UserId)
		if *expiresIn != "" {
			d, err := parseLifetime(*expiresIn)
			if err != nil {
				return usagef("--expires-in: %v", err)
			}
			req.ExpiresIn = durationpb.New(d)
		}
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.CreateToken(ctx, &req)
			if err != nil {
				return err
			}
			secret := resp.GetSecret()
			if secretOnly {
				_, err := fmt.Fprintln(a.stdout, secret)
				return err
			}
			if secretFile != "" {
				if err := writeSecret(secretFile, secret); err != nil {
					return fmt.Errorf("token %s created but its secret could not be saved (revoke it): %w", resp.GetToken().GetId(), err)
				}
				secret = ""
			}
			p := a.printer()
			switch {
			case p.JSON:
				v, err := render.JSONValue(resp.GetToken())
				if err != nil {
					return err
				}
				obj := v.(map[string]any)
				if secret != "" {
					obj["secret"] = secret
				} else {
					obj["secret_file"] = secretFile
				}
				return p.Value(obj, "")
			case p.Quiet:
				return p.Object(resp.GetToken())
			}
			if err := p.Object(resp.GetToken()); err != nil {
				return err
			}
			if secret != "" {
				fmt.Fprintf(a.stdout, "\nSECRET: %s\n(shown once: store it now)\n", secret)
			} else {
				fmt.Fprintf(a.stdout, "\nsecret written to %s\n", secretFile)
			}
			return nil
		})
	}
	var tokensLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List tokens (never their secrets)", Example: "  ncl tokens list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.Token{}, tokensLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListTokens(ctx, &guardv1.ListTokensRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetTokens()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &tokensLimit)
	revoke := &cobra.Command{
		Use: "revoke <id>", Short: "Revoke a token", Example: "  ncl tokens revoke tk_123", Args: one("id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.done(cmd, "revoked token "+args[0], func(ctx context.Context, c *clients) error {
				_, err := c.reg.RevokeToken(ctx, &guardv1.RevokeTokenRequest{Id: args[0]})
				return err
			})
		},
	}
	return noun("tokens", "Bearer tokens of runners, bridges, users and operators",
		"  ncl tokens create --kind user --name dana --user telegram:dana --secret-file dana.token", create, list, revoke)
}

func (a *app) runnersCmd() *cobra.Command {
	var runnersLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List runners, their leases and sessions", Example: "  ncl runners list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.Runner{}, runnersLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListRunners(ctx, &guardv1.ListRunnersRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetRunners()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &runnersLimit)
	return noun("runners", "Runners (one per host)", "  ncl runners list", list)
}

func (a *app) catalogCmd() *cobra.Command {
	var catalogLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List the guarded actions the server knows", Example: "  ncl catalog list\n  ncl catalog list -o json | jq -r '.[].action'", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if catalogLimit < 0 {
				return usagef("--limit: must not be negative")
			}
			return a.do(cmd, func(ctx context.Context, c *clients) error {
				var exempt []string
				entries, err := pages(ctx, c, catalogLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
					resp, err := c.reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: size, PageToken: token})
					exempt = resp.GetExemptDeliveryActions()
					return render.Msgs(resp.GetEntries()), resp.GetNextPageToken(), err
				})
				if err != nil {
					return err
				}
				p := a.printer()
				if err := p.List(&guardv1.CatalogEntry{}, entries); err != nil {
					return err
				}
				if !p.JSON && !p.Quiet && len(exempt) > 0 {
					fmt.Fprintf(a.stdout, "\nexempt delivery actions: %s\n", strings.Join(exempt, ", "))
				}
				return nil
			})
		},
	}
	limitFlag(list, &catalogLimit)
	var (
		action, mode string
		approvals    int32
		stepUp       bool
		esc          escalationFlags
	)
	set := &cobra.Command{
		Use:   "set",
		Short: "Set a catalog action's enforcement mode, quorum, step-up and escalation",
		Long: `Set how a catalog action's gates act and how many approvals its holds need.

--mode enforce (default): holds hold and gate denials deny.
--mode audit: the action runs; the decision log records what enforce would
  have answered (ncl decisions list shows it; the would-hold and would-deny
  rates are on the dashboard).
--mode warn: runs as audit, and the agent and its group's admins are told.
Protections of the system itself (global-scope holds, D1-D4, conformance,
grants) are always enforced.

--approvals N: every hold of the action needs N distinct eligible approvers
(each click checked as usual; one reject rejects). 0 = the approver scope's
default (clawguard-server --global-hold-approvals / --group-hold-approvals).

--step-up: a tap in chat cannot approve its holds; the approver approves in
the console after signing in again (within 10 minutes), or with their own
token (ncl). Global-scope admin commands always need it.

` + escalationHelp + `

Each set replaces all of the action's settings.`,
		Example: "  ncl catalog set --action a2a.send --mode audit\n  ncl catalog set --action self_mod.install_packages --approvals 2\n  ncl catalog set --action self_mod.add_mcp_server --step-up\n  ncl catalog set --action self_mod.install_packages --remind-after 10m --escalate-after 30m --escalate-to telegram:erin --escalate-to group:ops",
		Args:    none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := parseMode(mode)
			if err != nil {
				return err
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				remind, escalate := esc.durations()
				resp, err := c.reg.SetActionSettings(ctx, &guardv1.SetActionSettingsRequest{Action: action, Approvals: approvals, Mode: m, StepUp: stepUp,
					RemindAfter: remind, EscalateAfter: escalate, EscalateTo: esc.to})
				c.warned(resp)
				return resp.GetEntry(), err
			})
		},
	}
	set.Flags().StringVar(&action, "action", "", "catalog action (ncl catalog list)")
	set.Flags().StringVar(&mode, "mode", "enforce", "enforce, audit or warn")
	set.Flags().Int32Var(&approvals, "approvals", 0, "distinct approvals its holds need (0 = scope default)")
	set.Flags().BoolVar(&stepUp, "step-up", false, "a tap in chat cannot approve its holds: a fresh console sign-in or the approver's own token")
	esc.add(set.Flags())
	required(set, "action")
	return noun("catalog", "The catalog of guarded actions", "  ncl catalog list\n  ncl catalog set --action a2a.send --mode audit", list, set)
}

// parseMode reads an --mode flag ("" = unspecified, i.e. inherit).
func parseMode(s string) (guardv1.EnforcementMode, error) {
	m, err := enumword.Parse[guardv1.EnforcementMode](s)
	if err != nil {
		return 0, usagef("--mode %q: want %s", s, strings.Join(enumword.Words(m.Descriptor()), ", "))
	}
	return m, nil
}

func (a *app) decisionsCmd() *cobra.Command {
	var req guardv1.ListDecisionsRequest
	var since string
	list := &cobra.Command{
		Use: "list", Short: "List logged decisions, newest first",
		Example: "  ncl decisions list --effect deny\n  ncl decisions list --action a2a.send --group research --since 1h\n  ncl decisions list --actor dana --reads --since 2h --until 1h",
		Long: `List logged decisions, newest first. By default the list shows what changed
something or was refused: holds, denies, mutations and replays. Reads (allowed
list and get calls — every console page view and ncl read is one — and dry runs)
are left out; --reads shows them too.`,
		Args: none,
	}
	effect := enumVar(list, "effect", effectEnum, "only this effect")
	list.Flags().StringVar(&req.Action, "action", "", "only this catalog action")
	list.Flags().StringVar(&req.Group, "group", "", "only decisions about this agent group")
	list.Flags().StringVar(&since, "since", "", "only decisions after this time: a duration ago (90m, 24h) or RFC 3339")
	var until string
	list.Flags().StringVar(&until, "until", "", "only decisions before this time: a duration ago (30m) or RFC 3339")
	list.Flags().StringVar(&req.Actor, "actor", "", "only decisions of this actor: a user (name or id), or agent, host or system")
	list.Flags().BoolVar(&req.IncludeReads, "reads", false, "also reads: allowed list/get calls (page views, ncl reads) and dry runs, left out by default")
	var limit int32
	list.Flags().Int32Var(&limit, "limit", 100, "at most this many, newest first (0 = all: every page is read)")
	list.RunE = func(cmd *cobra.Command, _ []string) error {
		req.Effect = guardv1.Effect(effect.val)
		now := time.Now()
		for _, f := range []struct {
			value string
			into  **timestamppb.Timestamp
		}{{since, &req.Since}, {until, &req.Until}} {
			if f.value == "" {
				continue
			}
			t, err := parseSince(f.value, now)
			if err != nil {
				return err
			}
			*f.into = timestamppb.New(t)
		}
		a.groupArgs(&req.Group)
		switch req.Actor {
		case "", "agent", "host", "system":
		default:
			a.userArgs(&req.Actor) // a user's name or id
		}
		return a.listPages(cmd, &guardv1.DecisionRecord{}, limit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			req.Limit, req.PageToken = size, token
			resp, err := c.reg.ListDecisions(ctx, &req)
			return render.Msgs(resp.GetDecisions()), resp.GetNextPageToken(), err
		})
	}
	get := &cobra.Command{
		Use: "get <decision-id>", Short: "Show one logged decision and why it was made",
		Example: "  ncl decisions get dec_019ad9f0a1b2c3d4e5f6a7b8c9d0",
		Args:    one("decision-id"),
	}
	get.RunE = func(cmd *cobra.Command, args []string) error {
		return a.do(cmd, func(ctx context.Context, c *clients) error {
			resp, err := c.reg.GetDecision(ctx, &guardv1.GetDecisionRequest{Id: args[0]})
			if err != nil {
				return err
			}
			d := resp.GetDecision()
			x := d.GetExplanation()
			d.Explanation = nil // printed once, after the row
			return a.printer().Explained(d, x)
		})
	}
	return noun("decisions", "The decision log", "  ncl decisions list --effect deny\n  ncl decisions get <id>", list, get)
}

// parseSince accepts "90m"/"24h" (ago) or an RFC 3339 time.
// parseLifetime reads a token's lifetime: a Go duration (720h, 30m) or a
// whole number of days (90d).
func parseLifetime(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q: want a whole number of days (90d) or a duration (720h)", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q: want a duration (720h, 30m) or days (90d)", s)
	}
	return d, nil
}

func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, usagef("--since %q: a duration ago must be positive", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("--since %q: want a duration (90m, 24h) or an RFC 3339 time (2026-01-02T15:04:05Z)", s)
}

// writeSecret writes a token secret readable by its owner only.
func writeSecret(path, secret string) error { return writePrivate(path, []byte(secret+"\n")) }

// writePrivate writes a file readable by its owner only (0600), also when
// the file already existed with wider permissions: every file ncl writes
// whose content is secret-shaped (a token, an export) goes through it.
func writePrivate(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
