package paging

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		in   int32
		want int
		code codes.Code
	}{{0, DefaultLimit, codes.OK}, {1, 1, codes.OK}, {MaxLimit, MaxLimit, codes.OK}, {MaxLimit + 1, 0, codes.InvalidArgument}, {-1, 0, codes.InvalidArgument}} {
		got, err := Limit(c.in)
		if got != c.want || status.Code(err) != c.code {
			t.Errorf("Limit(%d) = %d, %v; want %d, %v", c.in, got, err, c.want, c.code)
		}
	}
}

func TestTokenRoundTripAndBinding(t *testing.T) {
	at := time.Date(2026, 11, 30, 6, 1, 2, 345678000, time.UTC)
	f := Filter("pending", "a2a")
	c, err := Decode(Next(at, "ho_1", f), f)
	if err != nil || !c.At.Equal(at) || c.ID != "ho_1" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
	if _, err := Decode(Next(at, "ho_1", f), Filter("approved", "a2a")); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := Decode("garbage!", f); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("garbage token: %v, want InvalidArgument", err)
	}
	if c, err := Decode("", f); c != nil || err != nil {
		t.Fatalf("empty token: %v %v, want the first page", c, err)
	}
}

func TestKeyTokenRoundTripAndBinding(t *testing.T) {
	f := Filter("groups", true)
	c, err := DecodeKey(NextKey("alpha", "ag_1", f), f)
	if err != nil || c.Key != "alpha" || c.ID != "ag_1" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
	if _, err := DecodeKey(NextKey("alpha", "ag_1", f), Filter("groups", false)); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := DecodeKey(Next(time.Now(), "ag_1", f), f); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a time token on a key list: %v, want InvalidArgument", err)
	}
	if _, err := Decode(NextKey("alpha", "ag_1", f), f); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a key token on a time list: %v, want InvalidArgument", err)
	}
}

func TestKeysTokenRoundTripAndBinding(t *testing.T) {
	f := Filter("roles", "u1")
	c, err := DecodeKeys(NextKeys(f, "u1", "admin", ""), f, 3)
	if err != nil || len(c.Keys) != 3 || c.Keys[1] != "admin" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
	if _, err := DecodeKeys(NextKeys(f, "u1", "admin", ""), Filter("roles", "u2"), 3); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := DecodeKeys(NextKey("alpha", "ag_1", f), f, 3); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a one-key token on a three-key list: %v, want InvalidArgument", err)
	}
}
