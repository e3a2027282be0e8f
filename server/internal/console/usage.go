package console

import (
	"fmt"
	"net/http"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The usage page: what the groups the user may read used of their models,
// per UTC day, provider and model (ListModelUsage as the user: a scoped
// admin sees their groups'), with the period's totals per group and model
// last. ?group= and ?since=YYYY-MM-DD narrow it.

func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	resp, err := callAll[*guardv1.ListModelUsageResponse](c, r, s, guardv1.Registry_ListModelUsage_FullMethodName,
		&guardv1.ListModelUsageRequest{Group: q.Get("group"), Since: q.Get("since")})
	n := namesOf(r)
	t := tableData{Headers: []string{"DAY", "GROUP", "PROVIDER", "MODEL", "CALLS", "INPUT", "OUTPUT", "CACHE READ", "CACHE WRITE", "COST"},
		Empty: "no model usage in the groups you may read (the last 30 days unless ?since=)"}
	type key struct{ group, provider, model string }
	totals := map[key]*guardv1.ModelUsage{}
	var order []key
	for _, u := range resp.GetUsage() {
		t.Rows = append(t.Rows, usageRow(u.GetDay(), n.GroupName(u.GetGroup()), u))
		k := key{u.GetGroup(), u.GetProvider(), u.GetModel()}
		if totals[k] == nil {
			totals[k] = &guardv1.ModelUsage{Group: u.GetGroup(), Provider: u.GetProvider(), Model: u.GetModel()}
			order = append(order, k)
		}
		sum := totals[k]
		sum.Calls += u.GetCalls()
		sum.InputTokens += u.GetInputTokens()
		sum.OutputTokens += u.GetOutputTokens()
		sum.CacheReadTokens += u.GetCacheReadTokens()
		sum.CacheWriteTokens += u.GetCacheWriteTokens()
		sum.CostMicros += u.GetCostMicros()
	}
	for _, k := range order {
		t.Rows = append(t.Rows, usageRow("total", n.GroupName(k.group), totals[k]))
	}
	c.table(w, r, s, "usage", "Model usage", t, err)
}

func usageRow(day, group string, u *guardv1.ModelUsage) []cell {
	num := func(v int64) cell { return txt(fmt.Sprint(v)) }
	return []cell{txt(day), txt(group), txt(u.GetProvider()), txt(u.GetModel()), num(u.GetCalls()), num(u.GetInputTokens()),
		num(u.GetOutputTokens()), num(u.GetCacheReadTokens()), num(u.GetCacheWriteTokens()),
		txt(fmt.Sprintf("%d.%06d", u.GetCostMicros()/1_000_000, u.GetCostMicros()%1_000_000))}
}
