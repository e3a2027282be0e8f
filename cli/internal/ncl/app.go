// Package ncl is the ncl command tree: `ncl <resource> <verb> [id] [flags]`
// over the Registry, Approvals and Guard gRPC services.
package ncl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/clawguard/clawguard/cli/internal/config"
	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/telemetry"
)

// Version is set at build time (-ldflags "-X ...ncl.Version=...").
var Version = "dev"

// Exit codes: the contract scripts rely on.
const (
	ExitOK     = 0
	ExitServer = 1 // the server answered with an error
	ExitUsage  = 2 // bad command line, bad config, or the server could not be reached
	// ExitHeld (3, statecmd.go): ncl apply made its changes, some held for approval.
)

// app carries one invocation: where output goes, the global flags, and the
// connection once a command needs it.
type app struct {
	stdout, stderr io.Writer
	getenv         config.Getenv

	flags   config.Flags
	output  string
	quiet   bool
	timeout time.Duration

	settings config.Settings
	conn     *grpc.ClientConn
	clients  *clients
	tracing  *telemetry.Tracing // nil until connect; off unless OTEL_EXPORTER_OTLP_ENDPOINT

	// refs are the command's group and user arguments, given by name or
	// id: do resolves them to ids before the call (names.go).
	groupRefs, userRefs []*string
	// names is the command's name book, set by do.
	names *names
	// viewer is the user the command reads as, when the command line says
	// (--as): "you approved" in a quorum's progress.
	viewer *string
	// views are how every kind's messages print (kinds.go).
	views render.Views
}

// structured: -o json or -o yaml.
func (a *app) structured() bool { return a.output == "json" || a.output == "yaml" }

// groupArgs marks values that name an agent group (by id or name).
func (a *app) groupArgs(refs ...*string) { a.groupRefs = append(a.groupRefs, refs...) }

// userArgs marks values that name a user (by id or display name).
func (a *app) userArgs(refs ...*string) { a.userRefs = append(a.userRefs, refs...) }

type clients struct {
	reg   guardv1.RegistryClient
	appr  guardv1.ApprovalsClient
	guard guardv1.GuardClient
	// stderr takes the warnings of settings the server took but that
	// cannot work today (warned).
	stderr io.Writer
}

// warned prints the warnings an answer carries (a quorum some group's
// approvers cannot meet), one a line, on standard error.
func (c *clients) warned(resp interface{ GetWarnings() []string }) {
	for _, w := range resp.GetWarnings() {
		fmt.Fprintf(c.stderr, "warning: %s\n", w)
	}
}

// Run executes ncl with args and returns the process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv config.Getenv) int {
	a := &app{stdout: stdout, stderr: stderr, getenv: getenv}
	defer a.close()
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	msg, code := describe(err)
	fmt.Fprintf(stderr, "ncl: %s\n", msg)
	if code == ExitUsage && isUsage(err) && cmd != nil {
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

func (a *app) close() {
	if a.conn != nil {
		_ = a.conn.Close()
	}
	_ = a.tracing.ShutdownWithin(2 * time.Second) // the command's spans leave before exit
}

func (a *app) printer() render.Printer {
	if a.views == nil {
		a.views = allViews()
	}
	p := render.Printer{W: a.stdout, JSON: a.output == "json" || a.output == "yaml", YAML: a.output == "yaml", Quiet: a.quiet,
		Wide: a.output == "wide", Views: a.views}
	if a.viewer != nil {
		p.Viewer = *a.viewer
	}
	if a.names != nil {
		p.Names = a.names
	}
	return p
}

// do runs one unary call with the command's deadline; gRPC errors come back
// marked as the server's answer so the exit code can tell them apart.
func (a *app) do(cmd *cobra.Command, f func(ctx context.Context, c *clients) error) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
	defer cancel()
	a.names = newNames(ctx, c)
	if err := a.names.groupsIn(a.groupRefs...); err != nil {
		return asServerError(err, a.settings.Server)
	}
	if err := a.names.usersIn(a.userRefs...); err != nil {
		return asServerError(err, a.settings.Server)
	}
	return asServerError(f(ctx, c), a.settings.Server)
}

// checkGlobals validates the flags every command shares.
func (a *app) checkGlobals() error {
	switch a.output {
	case "table", "wide", "json", "yaml":
	default:
		return usagef("invalid --output %q (want table, wide, json or yaml)", a.output)
	}
	if a.quiet && a.output != "table" {
		return usagef("-q and -o %s are exclusive", a.output)
	}
	if a.timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	return nil
}

// usageError is a mistake on the command line (exit 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func isUsage(err error) bool {
	var ue usageError
	var se *serverError
	var ce connError
	if errors.As(err, &ue) {
		return true
	}
	// Cobra's own errors (unknown flag, missing argument) are plain errors.
	return !errors.As(err, &se) && !errors.As(err, &ce)
}

// list runs a call returning a list and prints it.
func (a *app) list(cmd *cobra.Command, typ proto.Message, f func(ctx context.Context, c *clients) ([]proto.Message, error)) error {
	return a.do(cmd, func(ctx context.Context, c *clients) error {
		items, err := f(ctx, c)
		if err != nil {
			return err
		}
		return a.printer().List(typ, items)
	})
}

// listPages prints every item of a paged List RPC, up to limit (0 = all;
// negative is a usage error).
func (a *app) listPages(cmd *cobra.Command, typ proto.Message, limit int32,
	page func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error)) error {
	if limit < 0 {
		return usagef("--limit: must not be negative")
	}
	return a.list(cmd, typ, func(ctx context.Context, c *clients) ([]proto.Message, error) {
		return pages(ctx, c, limit, page)
	})
}

// limitFlag is every list command's --limit.
func limitFlag(cmd *cobra.Command, limit *int32) {
	cmd.Flags().Int32Var(limit, "limit", 0, "at most this many (0 = all: every page is read)")
}

// maxPage is the server's largest page (every List RPC's documented maximum).
const maxPage = 1000

// pages reads a List RPC page after page until the server says there is no
// next one or limit items were read (limit 0 = every page).
func pages(ctx context.Context, c *clients, limit int32,
	page func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error)) ([]proto.Message, error) {
	var out []proto.Message
	token := ""
	for {
		size := int32(maxPage)
		if limit > 0 {
			size = min(size, limit-int32(len(out)))
		}
		items, next, err := page(ctx, c, size, token)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" || (limit > 0 && int32(len(out)) >= limit) {
			return out, nil
		}
		token = next
	}
}

// object runs a call returning one object and prints it.
func (a *app) object(cmd *cobra.Command, f func(ctx context.Context, c *clients) (proto.Message, error)) error {
	return a.do(cmd, func(ctx context.Context, c *clients) error {
		m, err := f(ctx, c)
		if err != nil {
			return err
		}
		return a.printer().Object(m)
	})
}

// done runs a call with an empty answer and confirms it.
func (a *app) done(cmd *cobra.Command, sentence string, f func(ctx context.Context, c *clients) error) error {
	return a.do(cmd, func(ctx context.Context, c *clients) error {
		if err := f(ctx, c); err != nil {
			return err
		}
		return a.printer().Done(sentence)
	})
}
