// Package resources implements the admin resources of the Registry (groups,
// sessions, destinations, members, roles, users, wirings, messaging groups,
// message policies, user DMs, tokens, runners, catalog, decisions): one file
// per resource, its SQL next to the code that uses it.
//
// Methods return faults (package fault): bad input, missing rows and refused
// reads as they say, and database errors classified where their SQL ran
// (store.Faulted, deferred first thing in each method: a missing row is
// NotFound of what the method reads, a unique violation Exists, a database
// that cannot serve Unavailable).
// Authorization of writes is the guard interceptor's job, before the handler
// runs; what a caller may READ is decided here (see scope.go).
//
// One file per resource, SQL next to the code (a group's: groups,
// group_config, group_packages, group_mcp, group_mcp_tools — the MCP tool
// settings and the runners' reports —, group_restart). Each mutation's
// request checks are one function in precheck.go that its handler starts
// with and Precheck exposes to the admin guard, which runs it before the
// guard (an invalid agent call is refused, never held). It owns the group
// rows for everyone: CreateGroupTx (the one way a group is created) and
// LockConfigTx (the one lock of its container config); the chats' rows
// inbound's routing changes (FindOrCreateChatTx, DenyChatTx, WireTx,
// AddMemberTx, the pending registrations of channel_registrations.go); the
// escalation settings of catalog actions and policies (escalation.go:
// escalate_to names resolved to user ids and group:<id>, unknown ones
// refused); and the freezes table (freezes.go: a freeze records the
// authority that made it, and lifting it needs that authority, 0410; the
// rule that reads it is the guard's, guard/freeze.go).
package resources

import (
	"context"
	"time"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Catalog is what the catalog resource needs from the guard's catalog. A
// catalog that also has ExemptDeliveryActions() []string reports the
// server's exemption list too.
type Catalog interface {
	List() []*guardv1.CatalogEntry
}

// Service serves the admin resources over one pool.
type Service struct {
	pool        *pgxpool.Pool
	catalog     Catalog
	policyHolds PolicyHolds
}

// PolicyHolds runs in the transaction that sets a message policy, with the
// policy as written: the pending holds the policy made follow it (the
// approvals service owns them; app wires it).
type PolicyHolds func(ctx context.Context, tx pgx.Tx, p *guardv1.MessagePolicy) error

// New builds the service over the guard's catalog (nil: ListCatalog answers
// Unavailable); policyHolds may be nil.
func New(pool *pgxpool.Pool, catalog Catalog, policyHolds PolicyHolds) *Service {
	return &Service{pool: pool, catalog: catalog, policyHolds: policyHolds}
}

// invalid is InvalidArgument naming the field.
func invalid(field, format string, args ...any) error {
	return fault.InvalidField(field, format, args...)
}

// required refuses an empty required field.
func required(field, v string) error {
	if v == "" {
		return invalid(field, "required")
	}
	return nil
}

func notFound(format string, args ...any) error {
	return fault.NotFoundf(format, args...)
}

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsPtr(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// inTx runs fn in one transaction.
func (s *Service) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return store.InTx(ctx, s.pool, fn)
}

// affected turns "no row changed" into NotFound.
func affected(tag pgconn.CommandTag, err error, format string, args ...any) error {
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return notFound(format, args...)
	}
	return nil
}
