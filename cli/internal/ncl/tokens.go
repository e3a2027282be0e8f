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

	"github.com/clawguard/clawguard/cli/internal/render"
	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// ncl tokens: the bearer tokens of runners, bridges, users and operators
// (their secrets shown once, never read back).

func (a *app) tokensCmd() *cobra.Command {
	create := a.tokensCreate()
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

// tokensCreate creates a token and shows its secret once.
func (a *app) tokensCreate() *cobra.Command {
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
			return a.printCreatedToken(resp, secretFile, secretOnly)
		})
	}
	return create
}

// printCreatedToken shows a new token and its secret, once: on the
// terminal, alone (--secret-only), or written to secretFile.
func (a *app) printCreatedToken(resp *guardv1.CreateTokenResponse, secretFile string, secretOnly bool) error {
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
}

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

// tokenViews are how a token prints (never its secret).
var tokenViews = []render.View{
	render.For[*guardv1.Token](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.Token).GetId),
			render.C("KIND", func(t *guardv1.Token) string { return enumword.String(t.GetKind()) }),
			render.C("NAME", (*guardv1.Token).GetName),
			render.C("RUNNER", (*guardv1.Token).GetRunnerId),
			render.C("USER", (*guardv1.Token).GetUserId),
			render.C("CREATED", func(t *guardv1.Token) string { return render.Time(t.GetCreatedAt()) }),
			render.C("REVOKED", func(t *guardv1.Token) string { return render.Time(t.GetRevokedAt()) }),
			render.C("EXPIRES", func(t *guardv1.Token) string { return render.Time(t.GetExpiresAt()) }),
			render.C("LAST USED", func(t *guardv1.Token) string { return render.Time(t.GetLastUsedAt()) }),
		},
		ID: render.IDOf((*guardv1.Token).GetId),
	}),
}
