package resources

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/store"
)

// What groups used of their models (metering's model_usage): per group, UTC
// day, provider and model, newest day first; a caller reads the groups it
// may read.

// UsageDays is how far back a usage list reads when no since is given.
const UsageDays = 30

// ListModelUsage lists usage rows a page at a time.
func (s *Service) ListModelUsage(ctx context.Context, req *guardv1.ListModelUsageRequest) (_ *guardv1.ListModelUsageResponse, err error) {
	defer store.Faulted(&err, "model usage")
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetGroup() != "" && !v.sees(req.GetGroup()) {
		return nil, notFound("group %q not found", req.GetGroup())
	}
	since := time.Now().UTC().AddDate(0, 0, -UsageDays).Format(time.DateOnly)
	if req.GetSince() != "" {
		t, err := time.Parse(time.DateOnly, req.GetSince())
		if err != nil {
			return nil, invalid("since", "a day, YYYY-MM-DD (UTC)")
		}
		since = t.Format(time.DateOnly)
	}
	filter := paging.Filter("model_usage", v.all, v.groups, req.GetGroup(), since)
	cur, err := paging.DecodeKeys(req.GetPageToken(), filter, 4)
	if err != nil {
		return nil, err
	}
	after := []string{"", "", "", ""}
	if cur != nil {
		after = cur.Keys
	}
	rows, err := s.pool.Query(ctx, `SELECT agent_group_id, to_char(day, 'YYYY-MM-DD'), provider, model, calls, input_tokens, output_tokens,
			cache_read_tokens, cache_write_tokens, cost_micros
		FROM model_usage
		WHERE day >= $1::date AND ($2 = '' OR agent_group_id = $2) AND ($3 OR agent_group_id = ANY ($4))
		  AND ($5 = '' OR day < $5::date OR (day = $5::date AND (agent_group_id, provider, model) > ($6, $7, $8)))
		ORDER BY day DESC, agent_group_id, provider, model LIMIT $9`,
		since, req.GetGroup(), v.all, v.groups, after[0], after[1], after[2], after[3], limit+1)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*guardv1.ModelUsage, error) {
		var u guardv1.ModelUsage
		return &u, r.Scan(&u.Group, &u.Day, &u.Provider, &u.Model, &u.Calls, &u.InputTokens, &u.OutputTokens,
			&u.CacheReadTokens, &u.CacheWriteTokens, &u.CostMicros)
	})
	if err != nil {
		return nil, err
	}
	out := &guardv1.ListModelUsageResponse{}
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		out.NextPageToken = paging.NextKeys(filter, last.GetDay(), last.GetGroup(), last.GetProvider(), last.GetModel())
	}
	out.Usage = list
	return out, nil
}
