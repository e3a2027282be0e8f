package approvals

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Escalation (issue 32). A hold takes its plan when it is created — from
// the message policy that held it, else from its catalog action's
// settings — as remind_at, escalate_at and escalate_to. Every replica's
// sweep (EscalateDue, on the expiry tick) then takes each due step once:
// the step is claimed by a conditional UPDATE of the hold row (…AND
// reminded_at IS NULL, rows locked SKIP LOCKED) and its event — the
// notice, fanned out to Watch, the webhook and the chat bridges like a
// requested event — is written in the same transaction. A replica that
// dies between claim and commit leaves nothing: the next sweep, on any
// replica, takes the step again; once committed, the step is never taken
// again (and hold_events_once_idx would refuse a second event). Expiry at
// the TTL stays ExpireDue's: an expired hold is a deny.

// EscalationPlan is a hold's plan, read when it is created.
type EscalationPlan struct {
	RemindAfterS   int32    // 0: no reminder
	EscalateAfterS int32    // 0 (or no EscalateTo): no escalation
	EscalateTo     []string // user ids, "group:<agent group id>"
}

// policyAction is the catalog action whose exclusive holds a message
// policy makes (a2a.send, registered by package a2a, which approvals does
// not import); its resource "to" and the anchor group name the policy.
const policyAction = "a2a.send"

// queueEscalationPlan queues onto b the read of the plan of a hold about to
// be created: the message policy's when a policy held it and has a plan,
// else its catalog action's (no catalog action: none, nothing queued); *p is
// set when b's results are read.
func queueEscalationPlan(b *pgx.Batch, p *EscalationPlan, req CreateRequest, rule, groupID string) {
	if req.CatalogAction == "" {
		return
	}
	policyTo := ""
	if rule == ruleExclusive && req.CatalogAction == policyAction {
		policyTo = req.Resource["to"]
	}
	b.Queue(`SELECT remind_after_s, escalate_after_s, escalate_to FROM (
			SELECT 0 AS pref, remind_after_s, escalate_after_s, escalate_to FROM agent_message_policies
			 WHERE $2 <> '' AND from_agent_group_id = $3 AND to_agent_group_id = $2
			   AND (remind_after_s > 0 OR escalate_after_s > 0)
			UNION ALL
			SELECT 1, remind_after_s, escalate_after_s, escalate_to FROM action_settings WHERE action = $1
			UNION ALL
			SELECT 2, 0, 0, '{}'::text[]) p ORDER BY pref LIMIT 1`,
		req.CatalogAction, policyTo, groupID).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&p.RemindAfterS, &p.EscalateAfterS, &p.EscalateTo); err != nil {
			return fmt.Errorf("create hold: escalation plan: %w", err)
		}
		return nil
	})
}

// escalationBatch bounds the holds one step transaction claims (each event
// is a subtransaction: see resolveBatch).
const escalationBatch = 50

// EscalationStep names one step of the sweep.
type EscalationStep struct {
	Name  string // metric label: remind, escalate
	Event string // hold_events type: reminded, escalated
	claim string
}

var (
	// StepRemind re-notifies the hold's current approvers.
	StepRemind = EscalationStep{Name: "remind", Event: "reminded", claim: sqlClaimReminders}
	// StepEscalate adds escalate_to to the hold's approvers and notifies them.
	StepEscalate = EscalationStep{Name: "escalate", Event: "escalated", claim: sqlClaimEscalations}
)

// EscalateDue takes every due step of every pending hold: reminders, then
// escalations. Every replica runs it; each step of each hold is taken once.
// It returns how many steps it took.
func (s *Service) EscalateDue(ctx context.Context) (int, error) {
	total := 0
	for _, st := range []EscalationStep{StepRemind, StepEscalate} {
		n, err := s.TakeSteps(ctx, st)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// TakeSteps claims due holds for one step in batches, each batch one
// transaction with its events. BeforeStepCommit, when set (tests), runs
// after a batch's claims and events and before its commit.
func (s *Service) TakeSteps(ctx context.Context, st EscalationStep) (int, error) {
	total := 0
	for {
		var taken []*guardv1.Hold
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, st.claim+holdColumns, escalationBatch)
			if err != nil {
				return err
			}
			if taken, err = pgx.CollectRows(rows, holdFromRow); err != nil {
				return err
			}
			for _, h := range taken {
				// Last write for this hold: the notice goes out with the claim.
				if err := insertEventTx(ctx, tx, h, st.Event, "", "", false); err != nil {
					return err
				}
			}
			if s.BeforeStepCommit != nil && len(taken) > 0 {
				return s.BeforeStepCommit(ctx, st.Name, taken)
			}
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("%s holds: %w", st.Name, err)
		}
		for _, h := range taken {
			s.metrics.EscalationStepsTotal.WithLabelValues(st.Name).Inc()
			s.log.Info("hold "+st.Event, "hold", h.Id, "kind", h.Kind, "escalated_to", h.EscalatedTo)
		}
		total += len(taken)
		if len(taken) < escalationBatch {
			return total, nil
		}
	}
}
