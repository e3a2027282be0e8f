// Package decexport ships the decision log to a sink for long-term audit
// (OPA-style decision-log shipping): batches of decisions as gzip NDJSON,
// POSTed in (at, id) order from one replica at a time, with a durable
// watermark so Postgres need only keep the citation window and what
// operators query. Delivery is at least once: a batch whose answer was lost
// is posted again, so sinks dedupe on the decision id.
//
// Batches are gzip NDJSON in (at, id) order, HMAC-signed and/or bearer, from
// one replica at a time (the decision_export watermark row locked while a
// batch is in flight), with back-off on failure (the interval doubling to a
// minute, cenkalti/backoff); a row is shipped once 10 s old (its at is
// stamped before it commits).
package decexport

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/server/internal/guard"
)

// Headers of an export request.
const (
	// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the gzip body>",
	// the webhook's scheme (deploy/WEBHOOK.md).
	SignatureHeader = "X-Clawguard-Signature"
	// Version of the record format, in each record's "version".
	Version = 1
)

// Defaults of the shipper.
const (
	DefaultBatch    = 1000
	DefaultInterval = time.Second
	// DefaultSettle: only decisions older than this are shipped. A decision's
	// at is stamped before its row commits, so a younger row may still be
	// joined by an older one; past the settle time none is in flight.
	DefaultSettle = 10 * time.Second
	maxBackoff    = time.Minute
)

// Shipper posts the decision log to URL.
type Shipper struct {
	Pool   *pgxpool.Pool
	Log    *slog.Logger
	URL    string
	Secret []byte // HMAC key; nil = unsigned
	Token  string // bearer token; "" = none
	Client *http.Client

	Batch    int
	Interval time.Duration
	Settle   time.Duration

	// Observe, when set, hears of each attempt this replica made while
	// holding the watermark: how long the oldest settled decision not yet
	// shipped had waited (0 when none was due), how many it shipped, and
	// its error.
	Observe func(lag time.Duration, shipped int, err error)
}

// Run ships until ctx ends: a full batch is followed at once by the next,
// a failed one after a growing pause.
func (s *Shipper) Run(ctx context.Context) error {
	// After a failure: the interval, doubling up to maxBackoff; a batch
	// shipped starts it over.
	delays := retry.Exponential(s.interval(), maxBackoff)
	for ctx.Err() == nil {
		n, err := s.ShipOnce(ctx)
		wait := s.interval()
		switch {
		case err != nil && ctx.Err() == nil:
			wait = delays.NextBackOff()
			s.Log.Warn("decision export failed; retrying", "err", err, "in", wait)
		case err == nil:
			delays.Reset()
			if n == s.batch() {
				wait = 0
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	return nil
}

// ShipOnce posts the next batch past the watermark and advances it; it
// returns how many decisions it shipped (0 when another replica is shipping
// or nothing is due). The watermark row stays locked while the batch is in
// flight, so replicas never post the same batch concurrently.
func (s *Shipper) ShipOnce(ctx context.Context) (int, error) {
	var (
		shipped int
		held    bool          // this replica held the watermark
		lag     time.Duration // of the oldest decision due
	)
	err := pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var (
			at time.Time
			id string
		)
		err := tx.QueryRow(ctx, `SELECT through_at, through_id FROM decision_export FOR UPDATE SKIP LOCKED`).Scan(&at, &id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // another replica holds it
		}
		if err != nil {
			return fmt.Errorf("read export watermark: %w", err)
		}
		held = true
		// The columns are record's, by name (encode reads them so).
		rows, err := tx.Query(ctx, `SELECT id, at, action, `+guard.LoggedActorSQL+` AS actor, actor_kind, COALESCE(agent_group_id, '') AS agent_group_id, COALESCE(session_id, '') AS session_id,
				effect, reason, decided_by, grant_id, hold_id, latency_us, dry_run, runner_id, request_id, mode, would_effect, would_reason
			FROM decisions WHERE (at, id) > ($1, $2) AND at < now() - make_interval(secs => $3)
			ORDER BY at, id LIMIT $4`, at, id, s.settle().Seconds(), s.batch())
		if err != nil {
			return fmt.Errorf("read decisions: %w", err)
		}
		body, first, last, n, err := encode(rows)
		if err != nil {
			return err
		}
		lag = time.Since(first.at) // until it is shipped
		if n == 0 {
			lag = 0
		}
		if n == 0 {
			return nil
		}
		if err := s.post(ctx, body); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE decision_export SET through_at = $1, through_id = $2`, last.at, last.id); err != nil {
			return fmt.Errorf("advance export watermark: %w", err)
		}
		shipped = n
		// Shipped: a full batch leaves more behind it, about as old as its
		// last row; a short one caught up.
		lag = 0
		if n == s.batch() {
			lag = time.Since(last.at)
		}
		return nil
	})
	if held && s.Observe != nil {
		s.Observe(lag, shipped, err)
	}
	return shipped, err
}

// Watermark is the (at) through which the log has been shipped.
func Watermark(ctx context.Context, db interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (time.Time, error) {
	var at time.Time
	if err := db.QueryRow(ctx, `SELECT through_at FROM decision_export`).Scan(&at); err != nil {
		return time.Time{}, fmt.Errorf("read export watermark: %w", err)
	}
	return at, nil
}

type position struct {
	at time.Time
	id string
}

// record is one NDJSON line.
type record struct {
	Version     int             `json:"version" db:"-"`
	ID          string          `json:"id" db:"id"`
	At          time.Time       `json:"at" db:"at"`
	Action      string          `json:"action" db:"action"`
	Actor       json.RawMessage `json:"actor" db:"actor"`
	ActorKind   string          `json:"actor_kind" db:"actor_kind"`
	Group       string          `json:"agent_group_id,omitempty" db:"agent_group_id"`
	Session     string          `json:"session_id,omitempty" db:"session_id"`
	Effect      string          `json:"effect" db:"effect"`
	Reason      string          `json:"reason,omitempty" db:"reason"`
	DecidedBy   string          `json:"decided_by,omitempty" db:"decided_by"`
	Grant       string          `json:"grant_id,omitempty" db:"grant_id"`
	Hold        string          `json:"hold_id,omitempty" db:"hold_id"`
	LatencyUS   int64           `json:"latency_us" db:"latency_us"`
	DryRun      bool            `json:"dry_run,omitempty" db:"dry_run"`
	Runner      string          `json:"runner_id,omitempty" db:"runner_id"`
	Request     string          `json:"request_id,omitempty" db:"request_id"`
	Mode        string          `json:"mode,omitempty" db:"mode"`
	WouldEffect string          `json:"would_effect,omitempty" db:"would_effect"`
	WouldReason string          `json:"would_reason,omitempty" db:"would_reason"`
}

// encode gzips the rows as NDJSON and returns the first and the last
// row's positions.
func encode(rows pgx.Rows) (_ []byte, first, last position, n int, _ error) {
	defer rows.Close()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	for rows.Next() {
		r, err := pgx.RowToStructByName[record](rows)
		if err != nil {
			return nil, first, last, 0, fmt.Errorf("read decision: %w", err)
		}
		r.Version = Version
		if err := enc.Encode(r); err != nil {
			return nil, first, last, 0, fmt.Errorf("encode decision %s: %w", r.ID, err)
		}
		if n == 0 {
			first = position{r.At, r.ID}
		}
		last, n = position{r.At, r.ID}, n+1
	}
	if err := rows.Err(); err != nil {
		return nil, first, last, 0, fmt.Errorf("read decisions: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, first, last, 0, err
	}
	return buf.Bytes(), first, last, n, nil
}

// post delivers one batch; anything but a 2xx is a failure.
func (s *Shipper) post(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("export request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	req.Header.Set("Content-Encoding", "gzip")
	if s.Secret != nil {
		m := hmac.New(sha256.New, s.Secret)
		m.Write(body)
		req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(m.Sum(nil)))
	}
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	client := s.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("post decisions: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("post decisions: sink answered %s", resp.Status)
	}
	return nil
}

func (s *Shipper) batch() int {
	if s.Batch > 0 {
		return s.Batch
	}
	return DefaultBatch
}

func (s *Shipper) interval() time.Duration {
	if s.Interval > 0 {
		return s.Interval
	}
	return DefaultInterval
}

func (s *Shipper) settle() time.Duration {
	if s.Settle > 0 {
		return s.Settle
	}
	return DefaultSettle
}
