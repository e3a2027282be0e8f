package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

const sessionColumns = `id, agent_group_id, COALESCE(messaging_group_id, ''), COALESCE(runner_id, ''), status, created_at, last_active_at`

func scanSession(row pgx.Row) (*guardv1.Session, error) {
	var (
		s                 guardv1.Session
		st                string
		created, lastSeen time.Time
	)
	if err := row.Scan(&s.Id, &s.AgentGroupId, &s.MessagingGroupId, &s.RunnerId, &st, &created, &lastSeen); err != nil {
		return nil, err
	}
	var err error
	if s.Status, err = enumFromColumn[guardv1.SessionStatus]("status", st); err != nil {
		return nil, fmt.Errorf("session %s: %w", s.Id, err)
	}
	s.CreatedAt, s.LastActiveAt = ts(created), ts(lastSeen)
	return &s, nil
}

// ListSessions lists the sessions the caller may see, optionally of one
// group or runner, newest first.
func (s *Service) ListSessions(ctx context.Context, req *guardv1.ListSessionsRequest) (_ *guardv1.ListSessionsResponse, err error) {
	defer store.Faulted(&err, "sessions")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (created_at DESC, id), bound to the filters and the viewer.
	filter := paging.Filter(v.all, v.groups, req.GetGroup(), req.GetRunnerId())
	cur, err := paging.Decode(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	var after *time.Time
	afterID := ""
	if cur != nil {
		after, afterID = &cur.At, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE ($1 OR agent_group_id = ANY($2)) AND ($3 = '' OR agent_group_id = $3) AND ($4 = '' OR runner_id = $4)
		  AND ($5::timestamptz IS NULL OR created_at < $5 OR (created_at = $5 AND id > $6))
		ORDER BY created_at DESC, id LIMIT $7`, v.all, v.groups, req.GetGroup(), req.GetRunnerId(), after, afterID, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListSessionsResponse{}
	for rows.Next() {
		if len(out.Sessions) == limit {
			// One row past the page: there is a next one.
			last := out.Sessions[limit-1]
			out.NextPageToken = paging.Next(last.GetCreatedAt().AsTime(), last.GetId(), filter)
			break
		}
		sess, err := scanSession(rows)
		if err != nil {
			return nil, err
		}
		out.Sessions = append(out.Sessions, sess)
	}
	return out, rows.Err()
}

// session reads one session the caller may see; another group's session
// reads as NotFound (no existence oracle across groups).
func (s *Service) session(ctx context.Context, id string) (*guardv1.Session, error) {
	if err := required("id", id); err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	sess, err := scanSession(s.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if store.IsNoRows(err) || (err == nil && !v.sees(sess.GetAgentGroupId())) {
		return nil, notFound("session %q not found", id)
	}
	return sess, err
}

// GetSession reads a session.
func (s *Service) GetSession(ctx context.Context, req *guardv1.GetSessionRequest) (_ *guardv1.GetSessionResponse, err error) {
	defer store.Faulted(&err, "session")
	sess, err := s.session(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return &guardv1.GetSessionResponse{Session: sess}, nil
}

// History limits.
const (
	defaultHistory = 100
	maxHistory     = 1000
)

// GetSessionHistory returns the session's last events, oldest first.
func (s *Service) GetSessionHistory(ctx context.Context, req *guardv1.GetSessionHistoryRequest) (_ *guardv1.GetSessionHistoryResponse, err error) {
	defer store.Faulted(&err, "session")
	if req.GetLimit() < 0 {
		return nil, invalid("limit", "must not be negative")
	}
	if _, err := s.session(ctx, req.GetId()); err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	if limit == 0 {
		limit = defaultHistory
	}
	limit = min(limit, maxHistory)
	rows, err := s.pool.Query(ctx, `SELECT id, direction, kind, body, created_at FROM session_events
		WHERE session_id = $1 ORDER BY id DESC LIMIT $2`, req.GetId(), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.GetSessionHistoryResponse{}
	for rows.Next() {
		var (
			e    guardv1.SessionEvent
			body []byte
			at   time.Time
		)
		if err := rows.Scan(&e.Id, &e.Direction, &e.Kind, &body, &at); err != nil {
			return nil, err
		}
		if e.Body, err = jsonStruct(body); err != nil {
			return nil, fmt.Errorf("session event %d: %w", e.Id, err)
		}
		e.At = ts(at)
		out.Events = append(out.Events, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(out.Events)
	return out, nil
}

// jsonStruct decodes a JSONB object; a non-object is wrapped as {"value": ...}.
func jsonStruct(b []byte) (*structpb.Struct, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("decode body: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		m = map[string]any{"value": v}
	}
	return structpb.NewStruct(m)
}
