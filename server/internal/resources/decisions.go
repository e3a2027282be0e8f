package resources

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
)

// ListDecisions reads the decision log, newest first, filtered by action,
// effect, group and time. A restricted viewer sees its groups' decisions.
func (s *Service) ListDecisions(ctx context.Context, req *guardv1.ListDecisionsRequest) (*guardv1.ListDecisionsResponse, error) {
	effect, err := enumColumn("effect", req.GetEffect())
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	if req.Since != nil {
		if err := req.GetSince().CheckValid(); err != nil {
			return nil, invalid("since", "%v", err)
		}
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	var since *time.Time
	if req.Since != nil {
		t := req.GetSince().AsTime()
		since = &t
	}
	// Keyset paging (at DESC, id DESC), bound to the filters and the viewer.
	filter := paging.Filter(v.all, v.groups, req.GetAction(), effect, req.GetGroup(), since)
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
		  AND ($6::timestamptz IS NULL OR at >= $6)
		  AND ($8::timestamptz IS NULL OR (at, id) < ($8, $9))
		ORDER BY at DESC, id DESC LIMIT $7`,
		v.all, v.groups, req.GetAction(), effect, req.GetGroup(), since, limit+1, after, afterID)
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

const decisionColumns = `id, at, action, actor, actor_kind, COALESCE(agent_group_id, ''), COALESCE(session_id, ''),
		effect, reason, decided_by, grant_id, hold_id, latency_us, dry_run, trace, mode, would_effect, would_reason`

// scanDecision reads one decisionColumns row and its trace (nil when none).
func scanDecision(row pgx.Row) (*guardv1.DecisionRecord, []byte, error) {
	var (
		d                     guardv1.DecisionRecord
		at                    time.Time
		actor, trace          []byte
		kind, group, sess, ef string
		would                 string
		latencyUS             int64
	)
	if err := row.Scan(&d.Id, &at, &d.Action, &actor, &kind, &group, &sess, &ef, &d.Reason, &d.DecidedBy,
		&d.Grant, &d.HoldId, &latencyUS, &d.DryRun, &trace, &d.Mode, &would, &d.WouldReason); err != nil {
		return nil, nil, err
	}
	var err error
	if d.Effect, err = enumFromColumn[guardv1.Effect]("effect", ef); err != nil {
		return nil, nil, fmt.Errorf("decision %s: %w", d.Id, err)
	}
	if d.WouldEffect, err = enumFromColumn[guardv1.Effect]("would_effect", would); err != nil {
		return nil, nil, fmt.Errorf("decision %s: %w", d.Id, err)
	}
	d.At = ts(at)
	d.Latency = durationpb.New(time.Duration(latencyUS) * time.Microsecond)
	d.Actor = decodeActor(actor, kind, group, sess)
	return &d, trace, nil
}

// GetDecision reads one logged decision and its trace (what explains it). A
// restricted viewer reads only its groups' decisions; any other id reads as
// NotFound (no existence oracle).
func (s *Service) GetDecision(ctx context.Context, id string) (*guardv1.DecisionRecord, []byte, error) {
	if err := required("id", id); err != nil {
		return nil, nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, nil, err
	}
	d, trace, err := scanDecision(s.pool.QueryRow(ctx, `SELECT `+decisionColumns+` FROM decisions
		WHERE id = $1 AND ($2 OR agent_group_id = ANY($3))`, id, v.all, v.groups))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, notFound("decision %s not found", id)
	}
	return d, trace, err
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
