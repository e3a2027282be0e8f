package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/fault"
)

// Every fault kind has its code, and a fault's words (the server's own,
// whatever its kind) reach the caller while its cause does not; anything
// that is no fault is "internal error".
func TestStatusMapsEveryFaultKindOnce(t *testing.T) {
	seen := map[codes.Code]fault.Kind{}
	for k := fault.Internal; k <= fault.Unimplemented; k++ {
		code, ok := faultCodes[k]
		if !ok {
			t.Fatalf("fault kind %s has no code", k)
		}
		if other, dup := seen[code]; dup {
			t.Fatalf("kinds %s and %s share code %v", other, k, code)
		}
		seen[code] = k
		got := status.Convert(Status(fault.Wrap(k, errors.New("SQLSTATE 23505 secret"), "thing %d", 7)))
		if got.Code() != code {
			t.Errorf("%s → %v, want %v", k, got.Code(), code)
		}
		if strings.Contains(got.Message(), "secret") {
			t.Errorf("%s: the cause reached the caller: %q", k, got.Message())
		}
		if got.Message() != "thing 7" {
			t.Errorf("%s: message %q, want the fault's words", k, got.Message())
		}
	}
}

func TestStatusCarriesTheRetryHintAndDetails(t *testing.T) {
	st := status.Convert(Status(fault.Unavailablef(3*time.Second, nil, "not now")))
	if st.Code() != codes.Unavailable || RetryDelay(st) != 3*time.Second {
		t.Fatalf("unavailable → %v hint %v, want Unavailable with 3s", st.Code(), RetryDelay(st))
	}
	err := fault.WithDetails(fault.New(fault.Precondition, "approval pending"), &guardv1.ApprovalPending{HoldId: "hold_1"})
	st = status.Convert(Status(fmt.Errorf("admin call: %w", err)))
	var found bool
	for _, d := range st.Details() {
		if ap, ok := d.(*guardv1.ApprovalPending); ok && ap.GetHoldId() == "hold_1" {
			found = true
		}
	}
	if st.Code() != codes.FailedPrecondition || !found {
		t.Fatalf("precondition with a detail → %v %v, want FailedPrecondition carrying the ApprovalPending", st.Code(), st.Details())
	}
	if got := status.Convert(Status(errors.New("encode: boom"))); got.Code() != codes.Internal || got.Message() != "internal error" {
		t.Fatalf("no fault → %v %q, want Internal \"internal error\"", got.Code(), got.Message())
	}
	if c := status.Code(Status(fmt.Errorf("wrapped: %w", context.Canceled))); c != codes.Canceled {
		t.Fatalf("a cancelled call → %v, want Canceled", c)
	}
}
