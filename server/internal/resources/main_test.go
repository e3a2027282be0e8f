package resources_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/clawguard/clawguard/server/internal/api"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/clawguard/clawguard/migrations/pgtest"
	"github.com/clawguard/clawguard/server/internal/testserver"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// start runs a replica on a fresh database and returns operator clients.
func start(t *testing.T) (*testserver.Server, testserver.Clients) {
	t.Helper()
	srv := testserver.Start(t)
	return srv, srv.Operator(t)
}

// wantCode asserts a status code and, when field is set, that the message
// names it.
// wantCode: err is answered code at the API edge, naming field.
func wantCode(t *testing.T, err error, code codes.Code, field string) {
	t.Helper()
	st := status.Convert(api.Status(err))
	if st.Code() != code {
		t.Fatalf("want %v, got %v", code, err)
	}
	if field != "" && !strings.Contains(st.Message(), field) {
		t.Fatalf("error %q does not name field %q", st.Message(), field)
	}
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// exec runs setup SQL.
func exec(t *testing.T, srv *testserver.Server, sql string, args ...any) {
	t.Helper()
	if _, err := srv.Pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func count(t *testing.T, srv *testserver.Server, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := srv.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}
