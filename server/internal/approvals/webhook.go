package approvals

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>".
const SignatureHeader = "X-Clawguard-Signature"

// Sign is the signature header value for body.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// runWebhook posts every event after cursor from to the configured URL,
// in order. It is one more subscriber: when it falls behind it is dropped
// and resumes from its own cursor (kept in memory — a restarted replica
// starts from the then-current end; every replica posts every event, so
// receivers dedupe on the X-Clawguard-Cursor header).
func (s *Service) runWebhook(ctx context.Context, from int64) error {
	client := &http.Client{Timeout: 10 * time.Second}
	cursor := from
	for ctx.Err() == nil {
		err := s.Follow(ctx, cursor, false, nil, func(ev *guardv1.WatchResponse) error {
			s.postEvent(ctx, client, ev)
			cursor = ev.Cursor
			return nil
		})
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) != codes.ResourceExhausted {
			s.log.Warn("webhook follower stopped; resuming", "err", err, "cursor", cursor)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}

// postEvent delivers one event, retrying with exponential back-off; after
// WebhookAttempts failures the event is logged and skipped so one bad
// event cannot stall the stream forever.
func (s *Service) postEvent(ctx context.Context, client *http.Client, ev *guardv1.WatchResponse) {
	body, err := protojson.Marshal(ev)
	if err != nil {
		s.log.Error("webhook: encode event", "cursor", ev.Cursor, "err", err)
		return
	}
	sig := Sign(s.webhookSecret, body)
	backoff := s.WebhookBackoff
	for attempt := 1; ; attempt++ {
		err := s.postOnce(ctx, client, body, sig, ev.Cursor)
		if err == nil {
			return
		}
		s.metrics.WebhookFailuresTotal.Inc()
		if ctx.Err() != nil {
			return
		}
		if attempt >= s.WebhookAttempts {
			s.log.Error("webhook: giving up on event", "cursor", ev.Cursor, "hold", ev.GetHold().GetId(), "attempts", attempt, "err", err)
			return
		}
		s.log.Warn("webhook: delivery failed; retrying", "cursor", ev.Cursor, "attempt", attempt, "in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, s.WebhookMaxBackoff)
	}
}

func (s *Service) postOnce(ctx context.Context, client *http.Client, body []byte, sig string, cursor int64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, sig)
	req.Header.Set("X-Clawguard-Cursor", strconv.FormatInt(cursor, 10))
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
