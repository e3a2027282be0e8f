package ncl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func (a *app) usersCmd() *cobra.Command {
	var listLimit int32
	list := &cobra.Command{
		Use: "list", Short: "List users", Example: "  ncl users list", Args: none,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.listPages(cmd, &guardv1.User{}, listLimit, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
				resp, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
				return render.Msgs(resp.GetUsers()), resp.GetNextPageToken(), err
			})
		},
	}
	limitFlag(list, &listLimit)
	get := &cobra.Command{
		Use: "get <id|name>", Short: "Show one user (by id, or by display name)", Example: "  ncl users get telegram:alice\n  ncl users get Alice", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.GetUser(ctx, &guardv1.GetUserRequest{Id: args[0]})
				return resp.GetUser(), err
			})
		},
	}
	var cname, cid string
	create := &cobra.Command{
		Use: "create <id>", Short: "Create a user (<channel>:<handle>)",
		Example: "  ncl users create telegram:alice --display-name Alice\n  ncl users create --id telegram:alice   # the same",
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return usagef("%s takes one <id>", cmd.CommandPath())
			case len(args) == 1 && cid != "" && cid != args[0]:
				return usagef("two different ids: %q and --id %q", args[0], cid)
			case len(args) == 0 && cid == "":
				return usagef("%s needs the user id: <id> or --id", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			id := cid
			if len(args) == 1 {
				id = args[0]
			}
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.CreateUser(ctx, &guardv1.CreateUserRequest{Id: id, DisplayName: cname})
				return resp.GetUser(), err
			})
		},
	}
	create.Flags().StringVar(&cname, "display-name", "", "display name")
	create.Flags().StringVar(&cid, "id", "", "user id (instead of the argument)")
	var uname string
	update := &cobra.Command{
		Use: "update <id|name>", Short: "Change a user's display name", Example: "  ncl users update telegram:alice --display-name 'Alice B.'", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: args[0], DisplayName: uname})
				return resp.GetUser(), err
			})
		},
	}
	update.Flags().StringVar(&uname, "display-name", "", "display name")
	required(update, "display-name")
	bind, unbind := a.oidcBindingCmds()
	return noun("users", "Users (humans, namespaced <channel>:<handle>)", "  ncl users create telegram:alice --display-name Alice", list, get, create, update, bind, unbind)
}

// oidcBindingCmds: bind-oidc and unbind-oidc, the operator's word that an
// identity provider's subject signs in to the console as a user.
func (a *app) oidcBindingCmds() (*cobra.Command, *cobra.Command) {
	var bIssuer, bSubject string
	bind := &cobra.Command{
		Use: "bind-oidc <id|name>", Short: "Let an OIDC identity (issuer + subject) sign in to the console as this user",
		Example: "  ncl users bind-oidc telegram:dana --issuer https://accounts.example.com --subject 248289761001", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a.userArgs(&args[0])
			return a.object(cmd, func(ctx context.Context, c *clients) (proto.Message, error) {
				resp, err := c.reg.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: args[0], Issuer: bIssuer, Subject: bSubject})
				return resp.GetBinding(), err
			})
		},
	}
	bind.Flags().StringVar(&bIssuer, "issuer", "", "the identity provider's issuer URL, as its ID tokens carry it")
	bind.Flags().StringVar(&bSubject, "subject", "", "the ID token's sub claim")
	required(bind, "issuer", "subject")
	var uIssuer, uSubject string
	unbind := &cobra.Command{
		Use: "unbind-oidc <id|name>", Short: "Remove a user's OIDC binding (its console sessions end)",
		Example: "  ncl users unbind-oidc telegram:dana --issuer https://accounts.example.com --subject 248289761001", Args: one("id|name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			who := args[0]
			a.userArgs(&args[0])
			return a.done(cmd, fmt.Sprintf("unbound %s from %s", uSubject, who), func(ctx context.Context, c *clients) error {
				_, err := c.reg.UnbindOidc(ctx, &guardv1.UnbindOidcRequest{UserId: args[0], Issuer: uIssuer, Subject: uSubject})
				return err
			})
		},
	}
	unbind.Flags().StringVar(&uIssuer, "issuer", "", "the identity provider's issuer URL")
	unbind.Flags().StringVar(&uSubject, "subject", "", "the ID token's sub claim")
	required(unbind, "issuer", "subject")
	return bind, unbind
}

// userViews are how a user and a console sign-in print.
var userViews = []render.View{
	render.For[*guardv1.User](render.View{
		Cols: []render.Col{
			render.C("ID", (*guardv1.User).GetId),
			render.C("DISPLAY NAME", (*guardv1.User).GetDisplayName),
			render.C("CREATED", func(u *guardv1.User) string { return render.Time(u.GetCreatedAt()) }),
			render.C("OIDC", func(u *guardv1.User) string {
				var b []string
				for _, o := range u.GetOidcBindings() {
					b = append(b, o.GetIssuer()+" "+o.GetSubject())
				}
				return strings.Join(b, ", ")
			}),
		},
		ID: render.IDOf((*guardv1.User).GetId),
	}),
	render.For[*guardv1.OidcBinding](render.View{
		Cols: []render.Col{
			render.C("USER", (*guardv1.OidcBinding).GetUserId),
			render.C("ISSUER", (*guardv1.OidcBinding).GetIssuer),
			render.C("SUBJECT", (*guardv1.OidcBinding).GetSubject),
			render.C("CREATED", func(o *guardv1.OidcBinding) string { return render.Time(o.GetCreatedAt()) }),
		},
		ID: render.IDOf((*guardv1.OidcBinding).GetSubject),
	}),
}

// Users in the document: each with its display name and console sign-ins
// (the (issuer, subject) pairs bound to it: ncl users bind-oidc). Users are
// never deleted by apply.

var usersState = &statePart{read: readUsers, plan: planUsers, check: checkUsers, sort: sortUsers}

type userSpec struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name,omitempty"`
	// Console sign-ins bound to the user.
	OIDC []oidcSpec `yaml:"oidc,omitempty"`
}

type oidcSpec struct {
	Issuer  string `yaml:"issuer"`
	Subject string `yaml:"subject"`
}

func (o oidcSpec) String() string { return o.Issuer + " " + o.Subject }

// readUsers reads every user and their sign-ins.
func readUsers(ctx context.Context, c *clients, s *state, _ groupBook) error {
	users, err := listAll(ctx, c, func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
		return msgs(r.GetUsers()), r.GetNextPageToken(), err
	})
	if err != nil {
		return fmt.Errorf("read users: %w", err)
	}
	for _, m := range users {
		u := m.(*guardv1.User)
		s.Users = append(s.Users, userSpec{ID: u.GetId(), Name: u.GetDisplayName()})
	}
	return readOIDC(ctx, c, s.Users)
}

// readOIDC fills in each user's bindings (GetUser carries them).
func readOIDC(ctx context.Context, c *clients, users []userSpec) error {
	for i := range users {
		r, err := c.reg.GetUser(ctx, &guardv1.GetUserRequest{Id: users[i].ID})
		if err != nil {
			return fmt.Errorf("read user %s: %w", users[i].ID, err)
		}
		for _, b := range r.GetUser().GetOidcBindings() {
			users[i].OIDC = append(users[i].OIDC, oidcSpec{Issuer: b.GetIssuer(), Subject: b.GetSubject()})
		}
		slices.SortFunc(users[i].OIDC, func(a, b oidcSpec) int { return strings.Compare(a.String(), b.String()) })
	}
	return nil
}

// planUsers creates and renames users, then binds their sign-ins.
func planUsers(cur, want *state) (p planned) {
	have := map[string]userSpec{}
	for _, u := range cur.Users {
		have[u.ID] = u
	}
	for _, u := range want.Users {
		switch old, ok := have[u.ID]; {
		case !ok:
			p.changes = append(p.changes, change{'+', "user " + u.ID + named(u.Name), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.CreateUser(ctx, &guardv1.CreateUserRequest{Id: u.ID, DisplayName: u.Name})
				return err
			}})
		case old.Name != u.Name:
			p.changes = append(p.changes, change{'~', fmt.Sprintf("user %s: name %q → %q", u.ID, old.Name, u.Name), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.UpdateUser(ctx, &guardv1.UpdateUserRequest{Id: u.ID, DisplayName: u.Name})
				return err
			}})
		}
	}
	for _, u := range cur.Users {
		if !slices.ContainsFunc(want.Users, func(w userSpec) bool { return w.ID == u.ID }) {
			p.left = append(p.left, "user "+u.ID+" (users are never deleted by apply)")
		}
	}
	binds, unbinds := planOIDC(cur.Users, want.Users)
	p.changes, p.dels = append(p.changes, binds...), unbinds
	return p
}

// planOIDC lists the bindings want adds (after the users exist) and those it
// drops (deletions: with --prune).
func planOIDC(cur, want []userSpec) (changes, dels []change) {
	have := map[string][]oidcSpec{}
	for _, u := range cur {
		have[u.ID] = u.OIDC
	}
	for _, u := range want {
		for _, b := range u.OIDC {
			if slices.Contains(have[u.ID], b) {
				continue
			}
			changes = append(changes, change{'+', fmt.Sprintf("oidc sign-in of user %s: %s", u.ID, b), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.BindOidc(ctx, &guardv1.BindOidcRequest{UserId: u.ID, Issuer: b.Issuer, Subject: b.Subject})
				return err
			}})
		}
	}
	for _, u := range cur {
		i := slices.IndexFunc(want, func(w userSpec) bool { return w.ID == u.ID })
		if i < 0 {
			continue // the user is not deleted (users never are), nor their sign-ins
		}
		for _, b := range u.OIDC {
			if slices.Contains(want[i].OIDC, b) {
				continue
			}
			dels = append(dels, change{'-', fmt.Sprintf("oidc sign-in of user %s: %s", u.ID, b), func(ctx context.Context, c *clients, _ groupBook) error {
				_, err := c.reg.UnbindOidc(ctx, &guardv1.UnbindOidcRequest{UserId: u.ID, Issuer: b.Issuer, Subject: b.Subject})
				return err
			}})
		}
	}
	return changes, dels
}

func checkUsers(s *state, once func(kind, key string) error) (err error) {
	for _, u := range s.Users {
		err = firstErr(err, once("user", u.ID))
	}
	return err
}

func sortUsers(s *state) {
	slices.SortFunc(s.Users, func(a, b userSpec) int { return strings.Compare(a.ID, b.ID) })
}
