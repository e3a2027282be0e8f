package paging

import (
	"testing"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"
)

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		in   int32
		want int
		bad  bool
	}{{0, DefaultLimit, false}, {1, 1, false}, {MaxLimit, MaxLimit, false}, {MaxLimit + 1, 0, true}, {-1, 0, true}} {
		got, err := Limit(c.in)
		if got != c.want || (err != nil) != c.bad || (c.bad && !fault.Is(err, fault.Invalid)) {
			t.Errorf("Limit(%d) = %d, %v; want %d (invalid: %v)", c.in, got, err, c.want, c.bad)
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
	if _, err := Decode(Next(at, "ho_1", f), Filter("approved", "a2a")); !fault.Is(err, fault.Invalid) {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := Decode("garbage!", f); !fault.Is(err, fault.Invalid) {
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
	if _, err := DecodeKey(NextKey("alpha", "ag_1", f), Filter("groups", false)); !fault.Is(err, fault.Invalid) {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := DecodeKey(Next(time.Now(), "ag_1", f), f); !fault.Is(err, fault.Invalid) {
		t.Fatalf("a time token on a key list: %v, want InvalidArgument", err)
	}
	if _, err := Decode(NextKey("alpha", "ag_1", f), f); !fault.Is(err, fault.Invalid) {
		t.Fatalf("a key token on a time list: %v, want InvalidArgument", err)
	}
}

func TestKeysTokenRoundTripAndBinding(t *testing.T) {
	f := Filter("roles", "u1")
	c, err := DecodeKeys(NextKeys(f, "u1", "admin", ""), f, 3)
	if err != nil || len(c.Keys) != 3 || c.Keys[1] != "admin" {
		t.Fatalf("round trip: %+v %v", c, err)
	}
	if _, err := DecodeKeys(NextKeys(f, "u1", "admin", ""), Filter("roles", "u2"), 3); !fault.Is(err, fault.Invalid) {
		t.Fatalf("token of other filters: %v, want InvalidArgument", err)
	}
	if _, err := DecodeKeys(NextKey("alpha", "ag_1", f), f, 3); !fault.Is(err, fault.Invalid) {
		t.Fatalf("a one-key token on a three-key list: %v, want InvalidArgument", err)
	}
}
