package inbound_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

// RouteInbound validates at the edge and is for bridge and operator tokens only.
func TestRouteInboundRefusesMalformedMessagesAndOtherPrincipals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for name, m := range map[string]*guardv1.RouteInboundRequest{
		"no channel type":       {PlatformId: "p", SenderUserId: "telegram:a"},
		"no platform id":        {ChannelType: "telegram", SenderUserId: "telegram:a"},
		"unnamespaced sender":   {ChannelType: "telegram", PlatformId: "p", SenderUserId: "alice"},
		"NUL in the text":       {ChannelType: "telegram", PlatformId: "p", SenderUserId: "telegram:a", Text: "a\x00b"},
		"text over the maximum": {ChannelType: "telegram", PlatformId: "p", SenderUserId: "telegram:a", Text: string(make([]byte, 70<<10))},
	} {
		if _, err := f.bridge.Registry.RouteInbound(ctx, m); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	if n := f.count(`SELECT count(*) FROM messaging_groups`); n != 0 {
		t.Errorf("refused messages created %d messaging groups", n)
	}

	user := testserver.ClientsFor(f.srv.Conn(t, f.srv.Token(t, "user", "", "telegram:alice"), ""))
	_, err := user.Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "p"})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("user token: got %v, want PermissionDenied", err)
	}
	if _, err := f.srv.Operator(t).Registry.RouteInbound(ctx, &guardv1.RouteInboundRequest{ChannelType: "telegram", PlatformId: "p"}); err != nil {
		t.Errorf("operator token: %v", err)
	}
}
