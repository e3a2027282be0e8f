package approvals

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/cenkalti/backoff/v5"
	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/jsonview"
	"github.com/clawguard/clawguard/proto/retry"
	"github.com/clawguard/clawguard/proto/secret"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>".
const SignatureHeader = "X-Clawguard-Signature"

// CursorHeader carries the event's cursor: receivers dedupe on it (delivery
// is at least once).
const CursorHeader = "X-Clawguard-Cursor"

// WebhookVersion is the version field of every webhook body; it changes only
// when the body changes incompatibly (deploy/WEBHOOK.md).
const WebhookVersion = 1

// WebhookBody is the JSON a webhook receives for one event: the object
// `ncl approvals watch -o json` prints for it (jsonview: snake_case fields,
// enums as lower-case words, secrets redacted), plus "version".
func WebhookBody(ev *guardv1.WatchResponse) ([]byte, error) {
	v, err := jsonview.Value(secret.Redact(ev))
	if err != nil {
		return nil, err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("webhook body: event is not a JSON object")
	}
	obj["version"] = WebhookVersion
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // as ncl prints it: a "<" in a reason stays "<"
	if err := enc.Encode(obj); err != nil {
		return nil, fmt.Errorf("webhook body: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Sign is the signature header value for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookLockKey elects the one replica that posts webhook events.
const webhookLockKey int64 = 0x636c_6177_686f_6f6b // "clawhook"

// runWebhook posts every event to the configured URL, in order, from one
// replica at a time: the replica holding the webhook advisory lock (on a
// dedicated connection) posts and records its cursor in webhook_progress;
// the others wait to take over from that cursor. Delivery is at least once:
// an event in flight when the leader dies may be posted again, so
// receivers dedupe on X-Clawguard-Cursor.
func (s *Service) runWebhook(ctx context.Context) error {
	for ctx.Err() == nil {
		led, err := s.leadWebhook(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			s.log.Warn("webhook notifier: lost the database; retrying", "err", err)
		}
		wait := 2 * time.Second
		if led {
			wait = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
	return nil
}

// leadWebhook tries to become the webhook leader and, if it does, posts
// until ctx ends or the lock connection fails. led reports leadership.
func (s *Service) leadWebhook(ctx context.Context) (led bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return false, err
	}
	defer closeConn(conn) // releases the lock
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, webhookLockKey).Scan(&led); err != nil || !led {
		return false, err
	}
	// The first leader for this URL starts where this replica started.
	var cursor int64
	err = conn.QueryRow(ctx, `WITH ins AS (
			INSERT INTO webhook_progress (url, cursor) VALUES ($1, $2)
			ON CONFLICT (url) DO NOTHING RETURNING cursor)
		SELECT cursor FROM ins UNION ALL SELECT cursor FROM webhook_progress WHERE url = $1 LIMIT 1`, s.cfg.WebhookURL, s.startCursor).Scan(&cursor)
	if err != nil {
		return true, fmt.Errorf("read webhook progress: %w", err)
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		// Leadership lasts as long as the lock's connection.
		t := time.NewTicker(2 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				if err := conn.Ping(lctx); err != nil {
					cancel()
					return
				}
			}
		}
	}()
	s.log.Info("webhook notifier leading", "from_cursor", cursor)
	client := &http.Client{Timeout: 10 * time.Second}
	for lctx.Err() == nil {
		err := s.Follow(lctx, cursor, false, nil, func(ev *guardv1.WatchResponse) error {
			if !s.postEvent(lctx, client, ev) {
				return lctx.Err()
			}
			// Recorded even when leadership is ending: an event delivered
			// but not recorded is posted again by the next leader. Never
			// backwards, in case a new leader has already moved on.
			cursor = ev.Cursor
			rctx, cancel := context.WithTimeout(context.WithoutCancel(lctx), 5*time.Second)
			_, err := s.pool.Exec(rctx, `UPDATE webhook_progress SET cursor = $2, updated_at = now() WHERE url = $1 AND cursor < $2`, s.cfg.WebhookURL, cursor)
			cancel()
			if err != nil {
				return fmt.Errorf("record webhook progress: %w", err)
			}
			return lctx.Err()
		})
		if lctx.Err() != nil {
			return true, nil
		}
		if fault.Is(err, fault.OutOfRange) {
			// Our cursor's events were pruned by retention (the URL was
			// unset for longer than --event-retention): they cannot be
			// posted any more, so carry on from the oldest retained.
			through, perr := PrunedThrough(lctx, s.pool)
			if perr != nil {
				return true, perr
			}
			s.log.Warn("webhook: events after our cursor were pruned; skipping them", "from_cursor", cursor, "to_cursor", through)
			cursor = through
			continue
		}
		if !fault.Is(err, fault.Exhausted) {
			// A slow webhook is dropped and simply resumes; anything else
			// (the database) gives leadership up.
			return true, err
		}
	}
	return true, nil
}

// postEvent delivers one event, retrying with exponential back-off; after
// WebhookAttempts failures the event is logged and skipped so one bad
// event cannot stall the stream forever. It reports whether the event is
// done with (delivered or skipped); only an end of ctx leaves it undone.
// A post under way when ctx ends is finished (within the client's
// timeout), so a stopping leader does not leave the receiver with an
// event it then gets again from the next leader.
func (s *Service) postEvent(ctx context.Context, client *http.Client, ev *guardv1.WatchResponse) bool {
	body, err := WebhookBody(ev)
	if err != nil {
		s.log.Error("webhook: encode event", "cursor", ev.Cursor, "err", err)
		return true
	}
	sig := Sign(s.webhookSecret, body)
	attempt := 0
	_, err = backoff.Retry(ctx, func() (struct{}, error) {
		attempt++
		err := s.postOnce(context.WithoutCancel(ctx), client, body, sig, ev.Cursor)
		if err != nil {
			s.metrics.WebhookFailuresTotal.Inc()
		}
		return struct{}{}, err
	},
		backoff.WithBackOff(retry.Exponential(s.WebhookBackoff, s.WebhookMaxBackoff)),
		backoff.WithMaxTries(uint(max(1, s.WebhookAttempts))),
		backoff.WithMaxElapsedTime(0),
		backoff.WithNotify(func(err error, in time.Duration) {
			s.log.Warn("webhook: delivery failed; retrying", "cursor", ev.Cursor, "attempt", attempt, "in", in, "err", err)
		}))
	switch {
	case err == nil:
		return true
	case ctx.Err() != nil:
		return false
	}
	s.log.Error("webhook: giving up on event", "cursor", ev.Cursor, "hold", ev.GetHold().GetId(), "attempts", attempt, "err", err)
	return true
}

func (s *Service) postOnce(ctx context.Context, client *http.Client, body []byte, sig string, cursor int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, sig)
	req.Header.Set(CursorHeader, strconv.FormatInt(cursor, 10))
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		return fmt.Errorf("webhook answered %s", res.Status)
	}
	return nil
}

// closeConn closes a dedicated connection without hanging on a dead network.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
