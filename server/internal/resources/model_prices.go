package resources

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/modelrule"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Model prices (migration 0430): what a million tokens of a provider's
// model cost, in micro-units of the operator's currency, by kind of token.
// A model ending in * prices every model it prefixes; the longest wins
// (modelrule.PriceFor). A cost budget counts them; a model without a price
// costs nothing.

// SetModelPrice sets a price, or with remove deletes it.
func (s *Service) SetModelPrice(ctx context.Context, req *guardv1.SetModelPriceRequest) (_ *guardv1.SetModelPriceResponse, err error) {
	defer store.Faulted(&err, "model price")
	p := req.GetPrice()
	if err := checkModelPrice(p); err != nil {
		return nil, err
	}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if req.GetRemove() {
			tag, err := tx.Exec(ctx, `DELETE FROM model_prices WHERE provider = $1 AND model = $2`, p.GetProvider(), p.GetModel())
			return affected(tag, err, "no price for %s/%s", p.GetProvider(), p.GetModel())
		}
		var known bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM model_providers WHERE name = $1)`, p.GetProvider()).Scan(&known); err != nil {
			return err
		}
		if !known {
			return notFound("provider %q not found (ncl models providers list)", p.GetProvider())
		}
		_, err := tx.Exec(ctx, `INSERT INTO model_prices (provider, model, input_micros, output_micros, cache_read_micros, cache_write_micros)
			VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (provider, model) DO UPDATE SET input_micros = $3, output_micros = $4, cache_read_micros = $5,
				cache_write_micros = $6, updated_at = now()`,
			p.GetProvider(), p.GetModel(), p.GetInputMicros(), p.GetOutputMicros(), p.GetCacheReadMicros(), p.GetCacheWriteMicros())
		if err != nil {
			return fmt.Errorf("set the price of %s/%s: %w", p.GetProvider(), p.GetModel(), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.SetModelPriceResponse{}, nil
}

// ListModelPrices lists the prices by provider and model.
func (s *Service) ListModelPrices(ctx context.Context, _ *guardv1.ListModelPricesRequest) (_ *guardv1.ListModelPricesResponse, err error) {
	defer store.Faulted(&err, "model prices")
	list, err := readModelPrices(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	out := &guardv1.ListModelPricesResponse{}
	for _, p := range list {
		out.Prices = append(out.Prices, &guardv1.ModelPrice{Provider: p.Provider, Model: p.Model, InputMicros: p.Input,
			OutputMicros: p.Output, CacheReadMicros: p.CacheRead, CacheWriteMicros: p.CacheWrite})
	}
	return out, nil
}

// readModelPrices reads every price.
func readModelPrices(ctx context.Context, q store.Querier) ([]modelrule.Price, error) {
	rows, err := q.Query(ctx, `SELECT provider, model, input_micros, output_micros, cache_read_micros, cache_write_micros
		FROM model_prices ORDER BY provider, model`)
	if err != nil {
		return nil, fmt.Errorf("read model prices: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (modelrule.Price, error) {
		var p modelrule.Price
		return p, r.Scan(&p.Provider, &p.Model, &p.Input, &p.Output, &p.CacheRead, &p.CacheWrite)
	})
}

func checkModelPrice(p *guardv1.ModelPrice) error {
	if p == nil {
		return invalid("price", "required")
	}
	if err := modelrule.CheckProvider(p.GetProvider()); err != nil {
		return invalid("price.provider", "%v", err)
	}
	if err := modelrule.CheckPattern(p.GetModel()); err != nil {
		return invalid("price.model", "%v", err)
	}
	for field, v := range map[string]int64{"input_micros": p.GetInputMicros(), "output_micros": p.GetOutputMicros(),
		"cache_read_micros": p.GetCacheReadMicros(), "cache_write_micros": p.GetCacheWriteMicros()} {
		if v < 0 {
			return invalid("price."+field, "%d is negative", v)
		}
	}
	return nil
}
