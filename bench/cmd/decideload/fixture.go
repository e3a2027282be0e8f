package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// fixture is the load's world: groups g_i each with a session s_i on one
// runner, random destinations g_a → g_b, and the runner's token.
type fixture struct {
	runner, token string
	groups        []string
	sessions      []string
	pairs         [][2]int        // the destination pairs (indexes into groups)
	allowed       map[[2]int]bool // pairs with a destination
	draws         [][2]int        // the checks, in order
	rng           *mrand.Rand
	fga           *fgaStore // -mode openfga: the store the checks are asked of
}

func setup(ctx context.Context, dbURL string, n, dests int) (*fixture, error) {
	if dbURL == "" {
		return nil, errors.New("-database-url is required (fixture setup)")
	}
	if n < 2 || dests < 1 || dests > n*(n-1)/2 {
		return nil, fmt.Errorf("-groups %d / -destinations %d: want at least 2 groups and 1..n(n-1)/2 destinations", n, dests)
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	fx := newFixture(n, dests)
	secret := "cgt_" + base64.RawURLEncoding.EncodeToString([]byte(randHex(24)))
	hash := sha256.Sum256([]byte(secret))
	fx.token = secret
	var from, to []string
	for _, p := range fx.pairs {
		from, to = append(from, fx.groups[p[0]]), append(to, fx.groups[p[1]])
	}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO runners (id, lease_expires_at) VALUES ($1, now() + interval '1 hour')`, fx.runner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO tokens (id, kind, name, hash, runner_id) VALUES ($1, 'runner', 'decideload', $2, $3)`,
			"tok_"+fx.runner, hash[:], fx.runner); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO agent_groups (id, name) SELECT g, g FROM unnest($1::text[]) AS g`, fx.groups); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (id, agent_group_id, runner_id) SELECT s, g, $3 FROM unnest($1::text[], $2::text[]) AS x(s, g)`,
			fx.sessions, fx.groups, fx.runner); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id)
			SELECT f, t, t FROM unnest($1::text[], $2::text[]) AS x(f, t)`, from, to)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fixture: %w", err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE agent_groups, sessions, agent_destinations`); err != nil {
		return nil, fmt.Errorf("analyze: %w", err)
	}
	return fx, nil
}

// newFixture names n groups (each with a session) and draws dests distinct
// ordered pairs of them, the destinations: the same pairs for the same n and
// dests whichever system is measured (a fixed seed), so a side-by-side run
// asks both the same questions.
func newFixture(n, dests int) *fixture {
	tag := randHex(4)
	fx := &fixture{runner: "bench-" + tag, allowed: map[[2]int]bool{}, rng: mrand.New(mrand.NewPCG(1, 2))}
	for i := range n {
		fx.groups = append(fx.groups, fmt.Sprintf("bench-%s-g%d", tag, i))
		fx.sessions = append(fx.sessions, fmt.Sprintf("bench-%s-s%d", tag, i))
	}
	for len(fx.pairs) < dests {
		a, b := fx.rng.IntN(n), fx.rng.IntN(n)
		if a == b || fx.allowed[[2]int{a, b}] {
			continue
		}
		fx.allowed[[2]int{a, b}] = true
		fx.pairs = append(fx.pairs, [2]int{a, b})
	}
	return fx
}

// request i is drawn uniformly: even i from the destination pairs (allow),
// odd i from pairs without a destination (deny). Draws are precomputed so
// the generator's own cost stays out of the measurement.
func (fx *fixture) request(i int) *guardv1.DecideRequest {
	p := fx.draws[i%len(fx.draws)]
	return &guardv1.DecideRequest{
		Action:   "a2a.send",
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: fx.groups[p[0]], SessionId: fx.sessions[p[0]]}}},
		Resource: map[string]string{"to": fx.groups[p[1]]},
	}
}

// draw precomputes n checks, half allowed.
func (fx *fixture) draw(n int) {
	fx.draws = make([][2]int, n)
	for i := range fx.draws {
		if i%2 == 0 {
			fx.draws[i] = fx.pairs[fx.rng.IntN(len(fx.pairs))]
			continue
		}
		for {
			a, b := fx.rng.IntN(len(fx.groups)), fx.rng.IntN(len(fx.groups))
			if a != b && !fx.allowed[[2]int{a, b}] {
				fx.draws[i] = [2]int{a, b}
				break
			}
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
