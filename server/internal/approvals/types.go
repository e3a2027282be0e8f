// Package approvals is the one hold contract: creating holds (approver
// picking, delivery target, dedup), mayResolve, resolving, expiry and sweep,
// and the lifecycle events every replica streams.
//
// Events, exactly once and in order: every creation and resolution writes
// one hold_events row in the transaction that makes the change
// (UNIQUE(hold_id, type) is the backstop). Writers take no lock and commit
// in parallel; cursors can commit out of order, and a reader settles every
// gap below what it passes (a tombstone that waits for the one writer
// holding the cursor, see readEvents), so a reader that has passed cursor
// N never sees a smaller one appear later. The event is each transaction's
// last write, so a drawn cursor is in flight only for the insert and the
// commit. Each replica holds one LISTEN connection (package
// listener, shared with the other channels); a NOTIFY only wakes its
// reader, which re-reads the table after its last cursor and fans the
// events out to in-process subscribers (Watch streams, Await, the
// webhook), each with its own buffer: a full buffer drops that subscriber
// (ResourceExhausted), which resumes from its cursor.
//
// A hold's lifecycle reads as a decision does: what its rules need read in
// one batch, a pure function that decides, the named transition
// (transitions.go draws the diagram and holds every write of holds and
// hold_approvals), then the effects after the commit. Creating (create.go):
// who the hold is for and who may approve it, read (reach.go: anchorTx,
// approversTx, judged by quorumOf and unreachable; ReachableTx is a dry
// run's read-only check), the row planned with no I/O (createplan.go:
// planHold, pickDelivery), createTx, the requested event. Resolving
// (resolve.go): checkClick, readResolution, checkResolution and captureHolds
// (resolvecheck.go), record — a reason capture armed (capture.go), one
// approval of a quorum counted (quorum.go), or resolveTx with its push
// (tell.go) and event — then afterResolution: the audit line, the metrics
// and the approved handlers (dispatch.go). Expiry and sweep are expire.go; a
// freeze keeps a hold pending through the guard's freeze rule
// (guard.FreezeCovers). mayresolve.go is the one click rule (MayResolve,
// WhyNotResolver); standing.go the standing grants; escalate.go the
// reminders and escalations (a step claimed by a conditional UPDATE in the
// transaction that writes its event); cardnames.go turns the group ids of a
// card's own words into names, never those inside the requester's text;
// words.go is what the requester is told, in holdview's words. events.go
// writes and reads hold_events (the writers and readEvents); hub.go fans
// events out in the replica, listen.go wakes its reader, follow.go is Watch,
// await.go Await; webhook.go posts them, retried with cenkalti/backoff;
// reconcile.go re-sends or gives up the replays of approved holds never
// applied. Approvals.Get's view of a hold (query.go: View) carries who may
// resolve it and, with history, its events and the decisions that named it.
package approvals

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Hold kinds no decision creates (channel registration comes from inbound,
// credential use through Approvals.Request). The kinds decisions create are
// the catalog's approval actions (guard.Catalog.ApprovalKinds), declared
// once by the domain that registers the entry.
const (
	KindChannelRegistration = "channel_registration"
	KindOneCLICredential    = "onecli_credential"
)

// RequestKinds are the hold kinds no decision creates.
var RequestKinds = []string{KindChannelRegistration, KindOneCLICredential}

// HoldKinds is every kind a hold can have: the catalog's approval kinds and
// RequestKinds, sorted (the label set of the hold metrics).
func HoldKinds(approvalKinds []string) []string {
	out := slices.Concat(approvalKinds, RequestKinds)
	slices.Sort(out)
	return slices.Compact(out)
}

// CreateRequest is everything needed to create a hold. It is created in the
// caller's transaction (Decide creates the hold in the same transaction as
// its decision).
type CreateRequest struct {
	Kind          string // hold kind, e.g. KindCLICommand
	CatalogAction string // the catalog action whose decision held ("" for Request-made holds)
	Payload       *structpb.Struct
	Resource      map[string]string // the decided resource (a grant replays only it)
	SessionID     string            // "" for sessionless holds
	AgentGroupID  string            // anchor; derived from the session when empty and a session is set
	Requester     *guardv1.Actor
	Rule          *guardv1.ApproverRule
	Scope         guardv1.ApproverScope
	Title         string
	Question      string
	Options       []*guardv1.HoldOption
	DedupKey      string
	ExpiresAt     time.Time // zero: the configured default TTL
	OriginChannel string
	// RecordDeliveredTo stamps the delivered-to approver on an
	// admins-of-scope hold so they may resolve it too.
	RecordDeliveredTo bool
	DeliveryAction    string // runner delivery action to replay on approval
	SweptOnRestart    bool
	// Approvals is the quorum an exclusive rule asks (a message policy's);
	// admin-chain holds take theirs from scope, action and group settings.
	Approvals int
	// BeforeEvent, when set, is called right before a created hold's
	// requested event is written, with the result CreateHoldTx is about to
	// return: what the caller still writes in that transaction it queues
	// onto b, which goes out in the event's round trip, ahead of the event
	// (the event takes the event lock, held to commit, and every hold and
	// resolution waits on it). Its error, and the error of any statement
	// queued (their callbacks'), is returned.
	BeforeEvent func(ctx context.Context, b *pgx.Batch, res CreateResult) error
}

// CreateResult says what happened.
type CreateResult struct {
	Hold        *guardv1.Hold // nil when NoApprover
	Created     bool          // false: an existing live hold with the dedup key was returned
	Undelivered bool          // eligible approvers exist but none has a known DM
	// NoApprover is set when no eligible approver exists: no row was
	// created, and Reason says why (the requester is told).
	NoApprover bool
	Reason     string
	// Approvers says who may approve a created hold, by name (holdview's
	// words): what the requester is told.
	Approvers string
}
