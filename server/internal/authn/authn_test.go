package authn

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/clawguard/clawguard/server/internal/fault"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func withToken(ctx context.Context, secret string) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+secret))
}

// Many calls missing the cache at once (the moment an entry expires under
// load) send one query between them, and all get the principal.
func TestConcurrentMissesShareOneQuery(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterToken(ctx, pool, "op-sf", "operator", "single-flight", secret, "", ""); err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(pool)
	const callers = 64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, callers)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			cctx, err := a.Authenticate(withToken(ctx, secret))
			if err != nil {
				errs <- err
				return
			}
			if c, ok := FromContext(cctx); !ok || c.Principal.Kind != guardv1.Principal_PRINCIPAL_OPERATOR {
				errs <- status.Errorf(codes.Internal, "caller %+v", c)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if q := a.queries.Load(); q != 1 {
		t.Fatalf("%d concurrent misses sent %d token queries, want 1", callers, q)
	}
}

// A caller that gives up does not fail the lookup others share, and a
// revocation is still seen once the entry expires.
func TestLookupOutlivesItsFirstCallerAndSeesRevocation(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.NewPool(t)
	secret, err := NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterToken(ctx, pool, "op-rev", "operator", "revocation", secret, "", ""); err != nil {
		t.Fatal(err)
	}
	a := NewAuthenticator(pool)
	a.cacheTTL = 0 // every call looks the token up

	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := a.Authenticate(withToken(gone, secret)); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: got %v, want context.Canceled", err)
	}
	if _, err := a.Authenticate(withToken(ctx, secret)); err != nil {
		t.Fatalf("live caller after a cancelled one: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE tokens SET revoked_at = now() WHERE id = 'op-rev'`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(withToken(ctx, secret)); !fault.Is(err, fault.Unauthenticated) {
		t.Fatalf("revoked token: got %v, want Unauthenticated", err)
	}
}
