package resources

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/authn"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// ListDecisions reads the decision log, newest first, filtered by action,
// effect, group, actor and time. By default it leaves out reads (allowed
// calls of read-only admin RPCs, dry runs); include_reads shows them. A
// restricted viewer sees its groups' decisions.
func (s *Service) ListDecisions(ctx context.Context, req *guardv1.ListDecisionsRequest) (_ *guardv1.ListDecisionsResponse, err error) {
	defer store.Faulted(&err, "decisions")
	effect, err := enumColumn("effect", req.GetEffect())
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	var since, until *time.Time
	for field, ts := range map[string]*timestamppb.Timestamp{"since": req.GetSince(), "until": req.GetUntil()} {
		if ts == nil {
			continue
		}
		if err := ts.CheckValid(); err != nil {
			return nil, invalid(field, "%v", err)
		}
		t := ts.AsTime()
		if field == "since" {
			since = &t
		} else {
			until = &t
		}
	}
	if since != nil && until != nil && !since.Before(*until) {
		return nil, invalid("until", "must be after since")
	}
	actorKind, actorUser, err := actorFilter(req.GetActor())
	if err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	// Keyset paging (at DESC, id DESC), bound to the filters and the viewer.
	filter := paging.Filter(v.all, v.groups, req.GetAction(), effect, req.GetGroup(), since, until, req.GetActor(), req.GetIncludeReads())
	cur, err := paging.Decode(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	var after *time.Time
	afterID := ""
	if cur != nil {
		after, afterID = &cur.At, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+decisionColumns+`
		FROM decisions
		WHERE ($1 OR agent_group_id = ANY($2))
		  AND ($3 = '' OR action = $3) AND ($4 = '' OR effect = $4) AND ($5 = '' OR agent_group_id = $5)
		  AND ($6::timestamptz IS NULL OR at >= $6) AND ($10::timestamptz IS NULL OR at < $10)
		  AND ($11 = '' OR actor_kind = $11) AND ($12 = '' OR actor->'human'->>'user_id' = $12)
		  AND ($13 OR NOT (dry_run OR (effect = 'allow' AND action = ANY($14))))
		  AND ($8::timestamptz IS NULL OR (at, id) < ($8, $9))
		ORDER BY at DESC, id DESC LIMIT $7`,
		v.all, v.groups, req.GetAction(), effect, req.GetGroup(), since, limit+1, after, afterID,
		until, actorKind, actorUser, req.GetIncludeReads(), s.readActions())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListDecisionsResponse{}
	var lastAt time.Time
	for rows.Next() {
		if len(out.Decisions) == limit {
			// One row past the page: there is a next one.
			last := out.Decisions[limit-1]
			out.NextPageToken = paging.Next(lastAt, last.GetId(), filter)
			break
		}
		d, _, err := scanDecision(rows)
		if err != nil {
			return nil, err
		}
		lastAt = d.GetAt().AsTime()
		out.Decisions = append(out.Decisions, d)
	}
	return out, rows.Err()
}

// actorFilter reads ListDecisions' actor: a kind ("agent", "host",
// "system") or a user id, which is a human's.
func actorFilter(actor string) (kind, user string, err error) {
	switch {
	case actor == "":
		return "", "", nil
	case actor == "agent" || actor == "host" || actor == "system":
		return actor, "", nil
	case authn.Namespace(actor) != "":
		return "human", actor, nil
	}
	return "", "", invalid("actor", "%q: want a user id (telegram:dana), agent, host or system", actor)
}

// readActions are the admin RPCs that only read (ACCESS_OPEN): their allowed
// calls are what a page view or a list logs, left out of the log's default
// view.
func (s *Service) readActions() []string {
	var out []string
	if s.catalog == nil {
		return out
	}
	for _, e := range s.catalog.List() {
		if e.GetAccess() == guardv1.Access_ACCESS_OPEN {
			out = append(out, e.GetAction())
		}
	}
	return out
}

// decisionColumns are decisionRow's, by name.
const decisionColumns = `id, at, action, ` + guard.LoggedActorSQL + ` AS actor, actor_kind, COALESCE(agent_group_id, '') AS agent_group_id,
		COALESCE(session_id, '') AS session_id, effect, reason, decided_by, grant_id, hold_id, latency_us, dry_run,
		trace, mode, would_effect, would_reason`

// decisionRow is one decisionColumns row as stored.
type decisionRow struct {
	ID          string    `db:"id"`
	At          time.Time `db:"at"`
	Action      string    `db:"action"`
	Actor       []byte    `db:"actor"`
	ActorKind   string    `db:"actor_kind"`
	Group       string    `db:"agent_group_id"`
	Session     string    `db:"session_id"`
	Effect      string    `db:"effect"`
	Reason      string    `db:"reason"`
	DecidedBy   string    `db:"decided_by"`
	Grant       string    `db:"grant_id"`
	Hold        string    `db:"hold_id"`
	LatencyUS   int64     `db:"latency_us"`
	DryRun      bool      `db:"dry_run"`
	Trace       []byte    `db:"trace"`
	Mode        string    `db:"mode"`
	WouldEffect string    `db:"would_effect"`
	WouldReason string    `db:"would_reason"`
}

// scanDecision reads one decisionColumns row and its trace (nil when none).
func scanDecision(row pgx.CollectableRow) (*guardv1.DecisionRecord, []byte, error) {
	r, err := pgx.RowToStructByName[decisionRow](row)
	if err != nil {
		return nil, nil, err
	}
	d := &guardv1.DecisionRecord{
		Id: r.ID, At: ts(r.At), Action: r.Action, Actor: decodeActor(r.Actor, r.ActorKind, r.Group, r.Session),
		Reason: r.Reason, DecidedBy: r.DecidedBy, Grant: r.Grant, HoldId: r.Hold,
		Latency: durationpb.New(time.Duration(r.LatencyUS) * time.Microsecond), DryRun: r.DryRun,
		Mode: r.Mode, WouldReason: r.WouldReason,
	}
	if d.Effect, err = enumFromColumn[guardv1.Effect]("effect", r.Effect); err != nil {
		return nil, nil, fmt.Errorf("decision %s: %w", d.Id, err)
	}
	if d.WouldEffect, err = enumFromColumn[guardv1.Effect]("would_effect", r.WouldEffect); err != nil {
		return nil, nil, fmt.Errorf("decision %s: %w", d.Id, err)
	}
	return d, r.Trace, nil
}

// GetDecision reads one logged decision and its trace (what explains it). A
// restricted viewer reads only its groups' decisions; any other id reads as
// NotFound (no existence oracle).
func (s *Service) GetDecision(ctx context.Context, id string) (_ *guardv1.DecisionRecord, _ []byte, err error) {
	defer store.Faulted(&err, "decision")
	if err := required("id", id); err != nil {
		return nil, nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, nil, err
	}
	key, keyArgs := store.DecisionKey(3, id)
	rows, err := s.pool.Query(ctx, `SELECT `+decisionColumns+` FROM decisions
		WHERE `+key+` AND ($1 OR agent_group_id = ANY($2))`, append([]any{v.all, v.groups}, keyArgs...)...)
	if err != nil {
		return nil, nil, err
	}
	type logged struct {
		d     *guardv1.DecisionRecord
		trace []byte
	}
	got, err := pgx.CollectOneRow(rows, func(row pgx.CollectableRow) (logged, error) {
		d, trace, err := scanDecision(row)
		return logged{d, trace}, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("decision %s not found", id)
	}
	return got.d, got.trace, err
}

// decodeActor reads the stored actor; a row whose JSON does not parse still
// shows its kind and group.
func decodeActor(b []byte, kind, group, session string) *guardv1.Actor {
	var a guardv1.Actor
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &a); err == nil && a.GetKind() != nil {
		return &a
	}
	switch kind {
	case "host":
		return &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	case "agent":
		return &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: session}}}
	case "human":
		return &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{}}}
	}
	return &guardv1.Actor{Kind: &guardv1.Actor_System{System: &guardv1.SystemActor{}}}
}
