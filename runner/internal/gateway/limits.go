package gateway

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
)

// A send refused at a limit answers FAILED, saying which limit (with its
// figures and its flag) and when to send again; the agent also gets a
// notice, at most once a second, and each refusal is counted by limit.

// allow takes a token of the rate limit, or says how long until one is there.
func (g *Gateway) allow() (time.Duration, bool) {
	now := time.Now()
	r := g.limiter.ReserveN(now, 1)
	if !r.OK() {
		return time.Second, false // a burst of 0 never refills (not configurable)
	}
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now)
		return wait, false
	}
	return 0, true
}

func (g *Gateway) rateWords(wait time.Duration) string {
	l := g.opts.Limits
	return fmt.Sprintf("rate limited: this session's limit (%g actions a second, %d at once; the runner's --gateway-rate and --gateway-burst) is reached: retry in %s",
		l.Rate, l.Burst, retryIn(wait))
}

// refuseRate answers a send refused by the rate limit.
func (g *Gateway) refuseRate(requestID string, wait time.Duration) *agentv1.SendResponse {
	g.refused(LimitRate)
	msg := g.rateWords(wait)
	g.tellRefused(requestID, msg)
	return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: msg, Limit: LimitRate, RetryAfter: durationpb.New(wait)}
}

// refuseInFlight answers a send refused because the session has its limit
// of actions in flight.
func (g *Gateway) refuseInFlight() *agentv1.SendResponse {
	g.refused(LimitInFlight)
	msg := fmt.Sprintf("too many actions in flight: this session has %d, its limit (the runner's --gateway-in-flight): retry once one of them has answered",
		g.opts.Limits.InFlight)
	return &agentv1.SendResponse{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: msg, Limit: LimitInFlight}
}

func (g *Gateway) refused(limit string) {
	if g.opts.OnRefused != nil {
		g.opts.OnRefused(limit)
	}
}

// tellRefused tells the agent, at most once a second, that sends are refused.
func (g *Gateway) tellRefused(requestID, msg string) {
	g.mu.Lock()
	now := time.Now()
	tell := now.Sub(g.lastLimited) >= time.Second
	if tell {
		g.lastLimited = now
	}
	g.mu.Unlock()
	if tell {
		g.log.Warn("agent rate limited", "rate", g.opts.Limits.Rate, "burst", g.opts.Limits.Burst)
		g.inbox.Notice(&agentv1.Notice{Kind: agentv1.NoticeKind_NOTICE_KIND_FAILED, RequestId: clip(requestID, 128), Text: msg, At: timestamppb.Now()})
	}
}

// retryIn is a wait as an agent reads it: at least a millisecond, rounded.
func retryIn(d time.Duration) time.Duration {
	return max(d, time.Millisecond).Round(time.Millisecond)
}
