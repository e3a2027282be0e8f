package delivery

import (
	"fmt"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// What the agent is told of an outcome, in words.

// outcomeNotice is the agent's notice of an outcome (a DONE one with its result).
func outcomeNotice(requestID, name string, out Outcome) *agentv1.Notice {
	n := &agentv1.Notice{Kind: noticeKind(out.Status), Text: NoticeText(name, out), HoldId: out.HoldID, RequestId: requestID, At: timestamppb.Now()}
	if out.Status == agentv1.SendStatus_SEND_STATUS_DONE {
		n.Result = out.ResultStruct()
	}
	return n
}

func noticeKind(st agentv1.SendStatus) agentv1.NoticeKind {
	return map[agentv1.SendStatus]agentv1.NoticeKind{
		agentv1.SendStatus_SEND_STATUS_DONE:   agentv1.NoticeKind_NOTICE_KIND_RESULT,
		agentv1.SendStatus_SEND_STATUS_HELD:   agentv1.NoticeKind_NOTICE_KIND_HELD,
		agentv1.SendStatus_SEND_STATUS_DENIED: agentv1.NoticeKind_NOTICE_KIND_DENIED,
		agentv1.SendStatus_SEND_STATUS_FAILED: agentv1.NoticeKind_NOTICE_KIND_FAILED,
	}[st]
}

// Approvers puts a HOLD's approver rule in words for the agent (holdview's,
// with ids: the server's words, with names, come with the decision).
func Approvers(r *guardv1.ApproverRule) string { return holdview.Approvers(r, nil) }

// NoticeText is the human line an agent gets for an outcome.
func NoticeText(name string, out Outcome) string {
	switch out.Status {
	case agentv1.SendStatus_SEND_STATUS_DONE:
		if out.Reason != "" {
			return name + ": " + out.Reason
		}
		return name + " done"
	case agentv1.SendStatus_SEND_STATUS_HELD:
		if out.Approvers != "" {
			return fmt.Sprintf("%s is waiting for approval by %s (hold %s): %s", name, out.Approvers, out.HoldID, out.Reason)
		}
		return fmt.Sprintf("%s is waiting for approval (hold %s): %s", name, out.HoldID, out.Reason)
	case agentv1.SendStatus_SEND_STATUS_DENIED:
		return fmt.Sprintf("%s denied: %s", name, out.Reason)
	default:
		return out.Reason
	}
}

// ApprovedText is what the agent is told when an approved hold is about to
// run: what it asked, in the words every surface shows the hold with (the
// server's summary), and who approved it.
func ApprovedText(action string, r *guardv1.ReplayAction) string {
	what := action
	if s := r.GetSummary(); s != "" {
		what = s
	}
	if by := r.GetApprovedBy(); by != "" {
		return fmt.Sprintf("approved by %s: %s; running it now", by, what)
	}
	return what + " approved; running it now"
}
