package ncl

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// A change is one admin RPC that moves the server toward the document.
type change struct {
	op   byte // '+' create, '~' change, '-' delete
	what string
	// run makes the change; book is the groups as they are by then (a
	// group created earlier in the same apply has its id).
	run func(ctx context.Context, c *clients, book groupBook) error
}

func (ch change) String() string { return string(ch.op) + " " + ch.what }

// planned is a kind's part of the plan: its creates and changes, in the
// kind's place; its deletions (run with --prune, after every change, in
// reverse); deletions that run after every other (last: what the others
// let go, as a model provider the groups named); and what apply never
// deletes (left).
type planned struct {
	changes, dels, last []change
	left                []string
}

// plan lists the changes that make cur into want, in dependency order:
// each kind's, in the kinds' order (users and groups before what names
// them); deletions last, in reverse, and only with prune (unpruned ones
// come back as left).
func plan(cur, want *state, prune bool) (changes []change, left []string) {
	var dels, last []change
	for _, k := range kinds() {
		if k.state == nil {
			continue
		}
		p := k.state.plan(cur, want)
		changes, dels, last = append(changes, p.changes...), append(dels, p.dels...), append(last, p.last...)
		left = append(left, p.left...)
	}
	dels = append(last, dels...)
	slices.Reverse(dels) // what names a group or a chat goes before it
	if prune {
		return append(changes, dels...), left
	}
	for _, d := range dels {
		left = append(left, d.what)
	}
	return changes, left
}

func named(name string) string {
	if name == "" {
		return ""
	}
	return " (" + name + ")"
}

// idOr is a group's id by its name, or the name as it is (the server says
// when it is no group).
func idOr(book groupBook, name string) string {
	if id, ok := book.id[name]; ok {
		return id
	}
	return name
}

// heldAs is the hold a change became, when the server held it for approval
// (an agent's admin command, as every mutation of one is).
func heldAs(err error) (string, bool) {
	st, ok := status.FromError(err) // a wrapped status too
	if !ok || st.Code() != codes.FailedPrecondition {
		return "", false
	}
	for _, d := range st.Details() {
		if p, ok := d.(*guardv1.ApprovalPending); ok {
			return p.GetHoldId(), true
		}
	}
	return "", false
}
