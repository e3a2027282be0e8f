package ncl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/cli/internal/render"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/retry"
)

// ncl approvals watch: the holds' lifecycle events as they happen, followed
// across reconnects from the last cursor seen.

func (a *app) approvalsWatch() *cobra.Command {
	var req guardv1.WatchRequest
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print hold events live (requested, resolved); reconnects by itself",
		Long: `Follow hold lifecycle events as they happen. Each line carries the event's
cursor (#N). On a dropped connection ncl reconnects with back-off and resumes
after the last cursor it printed, so no event is lost or shown twice; to resume
a previous watch, pass its last cursor with --after. Without --after the watch
starts at the current end. -o json prints one JSON object per line.`,
		Example: "  ncl approvals watch\n  ncl approvals watch --group research -o json | jq .hold.id\n  ncl approvals watch --after 1042",
		Args:    none,
	}
	cmd.Flags().StringVar(&req.Kind, "kind", "", "only this hold kind")
	cmd.Flags().StringVar(&req.AgentGroupId, "group", "", "only holds anchored on this agent group (id or name)")
	cmd.Flags().Int64Var(&req.AfterCursor, "after", 0, "resume after this cursor (0 with --after: replay all retained events)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		req.FromNow = !cmd.Flags().Changed("after")
		return a.watch(cmd.Context(), &req)
	}
	return cmd
}

// Back-off between reconnects of a watch.
var (
	watchBackoffMin = 250 * time.Millisecond
	watchBackoffMax = 10 * time.Second
)

// watch follows the event stream until ctx ends, reconnecting after any
// transient failure from the last cursor seen.
func (a *app) watch(ctx context.Context, req *guardv1.WatchRequest) error {
	c, err := a.connect()
	if err != nil {
		return err
	}
	if req.AgentGroupId != "" {
		rctx, cancel := context.WithTimeout(ctx, a.timeout)
		req.AgentGroupId, err = newNames(rctx, c).group(req.AgentGroupId)
		cancel()
		if err != nil {
			return asServerError(err, a.settings.Server)
		}
	}
	// Groups and users by name in each line, read once as the caller.
	a.names = newNames(ctx, c)
	p := a.printer()
	fmt.Fprintln(a.stderr, "ncl: watching hold events (Ctrl-C to stop)")
	delays := retry.Exponential(watchBackoffMin, watchBackoffMax)
	for {
		err := a.watchOnce(ctx, c, req, p, delays.Reset)
		if ctx.Err() != nil {
			return nil // interrupted: a normal end of a watch
		}
		if !retryable(err) {
			return asServerError(err, a.settings.Server)
		}
		from := "the current end"
		if !req.FromNow {
			from = fmt.Sprintf("cursor %d", req.AfterCursor)
		}
		wait := delays.NextBackOff()
		fmt.Fprintf(a.stderr, "ncl: watch interrupted (%v); reconnecting in %s from %s\n", err, wait, from)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

func (a *app) watchOnce(ctx context.Context, c *clients, req *guardv1.WatchRequest, p render.Printer, progressed func()) error {
	stream, err := c.appr.Watch(ctx, req)
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if err != nil {
			return err
		}
		// Remember the position before printing: a reconnect resumes after it.
		req.AfterCursor, req.FromNow = ev.GetCursor(), false
		progressed()
		if err := p.Event(ev); err != nil {
			return err
		}
	}
}

// retryable: the stream ended or the server is (briefly) away; anything
// that a retry cannot fix (auth, bad request) ends the watch.
func retryable(err error) bool {
	if errors.Is(err, io.EOF) {
		return true
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable, codes.Aborted, codes.Internal, codes.Unknown, codes.DeadlineExceeded, codes.ResourceExhausted:
		return true
	}
	return false
}
