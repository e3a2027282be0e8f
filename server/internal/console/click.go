package console

import (
	"context"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/proto/click"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// A click on a hold's page: approve (once, or standing), or reject with a
// reason, sent as the signed-in user through the backend (click.Resolve).

func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	req := &guardv1.ResolveRequest{Id: id, Reason: strings.TrimSpace(r.PostFormValue("reason")), Choice: r.PostFormValue("choice")}
	switch r.PostFormValue("outcome") {
	case "approve":
		req.Outcome = guardv1.Outcome_OUTCOME_APPROVE
		// "Once" (empty), "session", or a duration: a standing grant,
		// capped and refused (global scope, step-up) by the server.
		switch st := r.PostFormValue("standing"); st {
		case "":
		case "session":
			req.StandingSession = true
		default:
			d, err := time.ParseDuration(st)
			if err != nil || d <= 0 {
				c.fail(w, r, s, http.StatusBadRequest, "standing: want once, session or a duration such as 1h")
				return
			}
			req.StandingFor = durationpb.New(d)
		}
	case "reject":
		req.Outcome = guardv1.Outcome_OUTCOME_REJECT
	default:
		c.fail(w, r, s, http.StatusBadRequest, "outcome: want approve or reject")
		return
	}
	// What the hold was before this click: a second approval by the same
	// approver (a double submit, a stale page) is said to be one.
	var before *guardv1.Hold
	if req.Outcome == guardv1.Outcome_OUTCOME_APPROVE {
		if g, err := call[*guardv1.GetResponse](c, r, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: id}); err == nil {
			before = g.GetHold()
		}
	}
	// A click the server cannot take now (the database restarting, out of
	// disk) is asked again after its hint, for a bounded time, rather than
	// shown as a failure; an attempt whose answer was lost is recognised.
	res, err := click.Resolve(r.Context(), click.Calls{
		Resolve: func(ctx context.Context, req *guardv1.ResolveRequest) (*guardv1.ResolveResponse, error) {
			return backendCall[*guardv1.ResolveResponse](ctx, c, s, guardv1.Approvals_Resolve_FullMethodName, req)
		},
		Get: func(ctx context.Context, id string) (*guardv1.Hold, error) {
			g, err := backendCall[*guardv1.GetResponse](ctx, c, s, guardv1.Approvals_Get_FullMethodName, &guardv1.GetRequest{Id: id})
			return g.GetHold(), err
		},
	}, req, click.Options{For: clickRetryFor, Clicker: s.UserID, OnRetry: func(err error, wait time.Duration) {
		c.d.Log.Warn("console click not taken now; asking again", "user", s.UserID, "hold", id, "err", err, "in", wait)
	}})
	mine := before != nil && (holdview.Approved(before, s.UserID) ||
		before.GetStatus() == guardv1.HoldStatus_HOLD_STATUS_APPROVED && before.GetResolver() == s.UserID)
	if err != nil {
		if mine && status.Code(err) == codes.FailedPrecondition {
			// This approver's approval resolved it before: the click stands.
			http.Redirect(w, r, "/holds/"+id+"?said="+saidAlready, http.StatusSeeOther)
			return
		}
		c.failRPC(w, r, s, err)
		return
	}
	if res.Repeated {
		c.d.Log.Info("console click: an earlier attempt had resolved it", "user", s.UserID, "hold", id)
	}
	c.d.Log.Info("console resolve", "user", s.UserID, "hold", id, "outcome", r.PostFormValue("outcome"))
	if mine && !res.Repeated {
		// The server records an approver once and answers as before.
		http.Redirect(w, r, "/holds/"+id+"?said="+saidAlready, http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/holds/"+id, http.StatusSeeOther)
}
