-- The model gateway (issue 44): an agent reaches its model only through its
-- runner, which holds the provider's credential and asks the guard before
-- every call (model.call on provider and model), reserves the call's worst
-- case against the group's budget before forwarding, and settles to the
-- provider's reported usage after.

-- Providers an operator gave Clawguard. The credential is write-only: no
-- read returns it; only a runner hosting a session of a group given the
-- provider reads it (GetModelRoute), to call the provider.
CREATE TABLE model_providers (
    name              TEXT PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    kind              TEXT NOT NULL CHECK (kind IN ('anthropic', 'openai')),
    base_url          TEXT NOT NULL CHECK (base_url ~ '^https?://'),
    credential        TEXT NOT NULL DEFAULT '',
    credential_set_at TIMESTAMPTZ,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A group's providers, model rules and default: facts of model.call, in the
-- group's config row (mirrored by the replicas' snapshots; the trigger
-- watches them).
--   model_rules: [{"provider": "anthropic", "model": "claude-3-5-*", "effect": "deny"}, ...]
--   model_default: what a model no rule names gets; '' = allow.
-- And what a call past the group's budget gets, the fact of model.budget:
-- model_over_budget ('' when the group has no budget, model_budgets).
ALTER TABLE container_configs
    ADD COLUMN model_providers TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN model_rules JSONB NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(model_rules) = 'array'),
    ADD COLUMN model_default TEXT NOT NULL DEFAULT '' CHECK (model_default IN ('', 'allow', 'hold', 'deny')),
    ADD COLUMN model_over_budget TEXT NOT NULL DEFAULT '' CHECK (model_over_budget IN ('', 'hold', 'deny'));

DROP TRIGGER fact_changed ON container_configs;
CREATE CONSTRAINT TRIGGER fact_changed
    AFTER INSERT OR DELETE OR UPDATE OF agent_group_id, cli_scope, mcp_servers, egress_rules, egress_default,
        model_providers, model_rules, model_default, model_over_budget ON container_configs
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
    EXECUTE FUNCTION fact_changed('agent_group_id');
ALTER TABLE container_configs ENABLE ALWAYS TRIGGER fact_changed;

-- A group's budget: tokens (input + output + cache) and, optionally, cost
-- (micro-units of the prices' currency) per UTC day or month; 0 = none.
-- What a call past it gets is container_configs.model_over_budget.
CREATE TABLE model_budgets (
    agent_group_id TEXT PRIMARY KEY REFERENCES agent_groups (id) ON DELETE CASCADE,
    period         TEXT NOT NULL CHECK (period IN ('day', 'month')),
    tokens         BIGINT NOT NULL DEFAULT 0 CHECK (tokens >= 0),
    cost_micros    BIGINT NOT NULL DEFAULT 0 CHECK (cost_micros >= 0),
    updated_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Prices per million tokens, in micro-units, by provider and model (a model
-- name ending in * prices every model it prefixes; the longest wins).
CREATE TABLE model_prices (
    provider          TEXT NOT NULL,
    model             TEXT NOT NULL,
    input_micros      BIGINT NOT NULL DEFAULT 0 CHECK (input_micros >= 0),
    output_micros     BIGINT NOT NULL DEFAULT 0 CHECK (output_micros >= 0),
    cache_read_micros BIGINT NOT NULL DEFAULT 0 CHECK (cache_read_micros >= 0),
    cache_write_micros BIGINT NOT NULL DEFAULT 0 CHECK (cache_write_micros >= 0),
    updated_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (provider, model)
);

-- The budget's counters: per group and period (the group's budget period,
-- UTC), what was spent — always the sum of model_usage over the period —
-- and what calls in flight reserved. A reservation is one conditional
-- UPDATE of its counter (spent + reserved + this ≤ budget), so concurrent
-- calls cannot overshoot. A group without a budget has no counter; one is
-- made from model_usage when a budget is set or a period begins.
CREATE TABLE model_spend (
    agent_group_id  TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    period          TEXT NOT NULL CHECK (period IN ('day', 'month')),
    period_start    DATE NOT NULL,
    spent_tokens    BIGINT NOT NULL DEFAULT 0,
    reserved_tokens BIGINT NOT NULL DEFAULT 0 CHECK (reserved_tokens >= 0),
    spent_cost      BIGINT NOT NULL DEFAULT 0,
    reserved_cost   BIGINT NOT NULL DEFAULT 0 CHECK (reserved_cost >= 0),
    PRIMARY KEY (agent_group_id, period, period_start)
);

-- One call's reservation, keyed by the model.call ALLOW it cites (one
-- reservation per decision: the citation is single use), settled exactly
-- once (settled_at). counted_period/counted_start name the counter whose
-- reserved_* it added to ('' when the group had no budget). A call past
-- the budget also cites a model.budget ALLOW, once.
CREATE TABLE model_reservations (
    id                 TEXT PRIMARY KEY,
    agent_group_id     TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    session_id         TEXT NOT NULL,
    runner_id          TEXT NOT NULL,
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    day                DATE NOT NULL,
    worst_input        BIGINT NOT NULL CHECK (worst_input >= 0),
    worst_output       BIGINT NOT NULL CHECK (worst_output >= 0),
    tokens             BIGINT NOT NULL CHECK (tokens >= 0),
    cost               BIGINT NOT NULL CHECK (cost >= 0),
    counted_period     TEXT NOT NULL DEFAULT '' CHECK (counted_period IN ('', 'day', 'month')),
    counted_start      DATE,
    budget_decision_id TEXT UNIQUE,
    created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    settled_at         TIMESTAMPTZ,
    complete           BOOLEAN
);
CREATE INDEX model_reservations_open_idx ON model_reservations (created_at) WHERE settled_at IS NULL;

-- What was used, per group, UTC day (the day its reservation was made),
-- provider and model (ncl usage, the console's usage page).
CREATE TABLE model_usage (
    agent_group_id     TEXT NOT NULL REFERENCES agent_groups (id) ON DELETE CASCADE,
    day                DATE NOT NULL,
    provider           TEXT NOT NULL,
    model              TEXT NOT NULL,
    calls              BIGINT NOT NULL DEFAULT 0,
    input_tokens       BIGINT NOT NULL DEFAULT 0,
    output_tokens      BIGINT NOT NULL DEFAULT 0,
    cache_read_tokens  BIGINT NOT NULL DEFAULT 0,
    cache_write_tokens BIGINT NOT NULL DEFAULT 0,
    cost_micros        BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_group_id, day, provider, model)
);
CREATE INDEX model_usage_day_idx ON model_usage (day);
