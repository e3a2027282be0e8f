package ncl

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// prunedWatch answers every Watch as the server does for a cursor that
// retention pruned.
type prunedWatch struct {
	guardv1.UnimplementedApprovalsServer
}

func (prunedWatch) Watch(*guardv1.WatchRequest, grpc.ServerStreamingServer[guardv1.WatchResponse]) error {
	return status.Error(codes.OutOfRange, "cursor 3 was pruned; the oldest retained is 40 — resume from 40 or from_now")
}

// TestWatchFromPrunedCursor: a pruned cursor is not retried; ncl says so
// and exits 1.
func TestWatchFromPrunedCursor(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	guardv1.RegisterApprovalsServer(s, prunedWatch{})
	go s.Serve(l)
	t.Cleanup(s.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errb bytes.Buffer
	code := Run(ctx, []string{"approvals", "watch", "--after", "3"}, &out, &errb,
		envOf(map[string]string{"CLAWGUARD_SERVER": l.Addr().String(), "CLAWGUARD_TOKEN": "cgt_secret", "HOME": t.TempDir()}))
	if ctx.Err() != nil {
		t.Fatal("watch kept retrying a pruned cursor")
	}
	if code != ExitServer {
		t.Errorf("exit %d, want %d", code, ExitServer)
	}
	want := "ncl: out of range: cursor 3 was pruned; the oldest retained is 40 — resume from 40 or from_now"
	if !strings.Contains(errb.String(), want) || strings.Contains(errb.String(), "reconnecting") {
		t.Errorf("stderr %q, want %q and no reconnect", errb.String(), want)
	}
}
