package owners_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// owner is the package (its directory under server/internal) that alone
// writes each table. Every table the migrations create is listed; a new
// one gets its line with its migration.
var owner = map[string]string{
	// A session row from creation to deletion, and its history.
	"sessions":       "sessions",
	"session_events": "sessions",
	// The durable outbox to runners (acks, re-targeting on a move).
	"runner_pushes": "pushes",
	// Runners, their leases and the sweep's clock.
	"runners":        "registry",
	"registry_clock": "registry",

	// The admin resources; chats, their wirings and registrations too.
	"agent_groups":                  "resources",
	"container_configs":             "resources",
	"agent_destinations":            "resources",
	"agent_group_members":           "resources",
	"agent_message_policies":        "resources",
	"messaging_groups":              "resources",
	"messaging_group_agents":        "resources",
	"pending_channel_registrations": "resources",
	"users":                         "resources",
	"user_roles":                    "resources",
	"user_dms":                      "resources",
	"oidc_bindings":                 "resources",
	"tokens":                        "authn",
	"action_settings":               "resources",
	"freezes":                       "resources",
	"pending_questions":             "resources",
	"mcp_server_settings":           "resources",
	"mcp_tool_settings":             "resources",
	"mcp_server_tools":              "resources",
	"mcp_server_states":             "resources",
	"model_providers":               "resources",
	"model_prices":                  "resources",
	"model_budgets":                 "resources",

	// The model gateway's metering: budget counters, reservations, usage.
	"model_spend":        "metering",
	"model_reservations": "metering",
	"model_usage":        "metering",

	// The hold contract and its event log.
	"holds":              "approvals",
	"hold_approvals":     "approvals",
	"standing_grants":    "approvals",
	"hold_events":        "approvals",
	"hold_events_pruned": "approvals",
	"webhook_progress":   "approvals",

	// The decision log.
	"decisions":         "guard",
	"decision_requests": "guard",
	"decisions_default": "guard",

	"chat_outbox":      "chatout",
	"fact_changes":     "snapshot",
	"fact_revision":    "snapshot",
	"console_sessions": "console",
	"decision_export":  "decexport",

	"inbound_name_captures": "inbound",
	"dropped_messages":      "inbound",
}

// write finds a statement that changes a table: the verb, then the table
// (ON CONFLICT's DO UPDATE and a locking FOR UPDATE are told apart by
// what precedes or follows them, see writes).
var write = regexp.MustCompile(`(?i)\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?("?[a-z_][a-z0-9_]*"?)`)

// lockOrUpsert precedes an UPDATE that changes no table of its own.
var lockOrUpsert = regexp.MustCompile(`(?i)\b(FOR|KEY|DO)\s+$`)

// builtTarget is a write whose table is made at run time (a format verb,
// or an expression joined in: " ? "), which the check could not see.
var builtTarget = regexp.MustCompile(`(?i)\b(INSERT\s+INTO|DELETE\s+FROM|TRUNCATE(?:\s+TABLE)?)\s+(?:ONLY\s+)?(%|\?)|\bUPDATE\s+(?:ONLY\s+)?%`)

// writes are the tables s writes.
func writes(s string) []string {
	var out []string
	for _, m := range write.FindAllStringSubmatchIndex(s, -1) {
		verb := strings.ToUpper(s[m[2]:m[3]])
		table := strings.ToLower(strings.Trim(s[m[4]:m[5]], `"`))
		if verb == "UPDATE" && (lockOrUpsert.MatchString(s[:m[2]]) || table == "set" || table == "of") {
			continue
		}
		out = append(out, table)
	}
	return out
}

type site struct{ pkg, at string }

// found is every write of a known table in the server's non-test code:
// table → the sites that write it. A write whose table is built at run
// time fails the test: the owner of a table must be readable in its SQL.
func found(t *testing.T, root string, tables map[string]bool) map[string][]site {
	t.Helper()
	out := map[string][]site{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		record := func(n ast.Node, sql string) {
			if builtTarget.MatchString(sql) {
				t.Errorf("%s: a write whose table is built at run time (%q): name the table in the statement",
					fset.Position(n.Pos()), builtTarget.FindString(sql))
			}
			for _, table := range writes(sql) {
				if !tables[table] {
					continue // words in prose, aliases, a partition made at run time
				}
				at := fset.Position(n.Pos())
				file, _ := filepath.Rel(root, at.Filename)
				out[table] = append(out[table], site{pkg, fmt.Sprintf("%s:%d", filepath.ToSlash(file), at.Line)})
			}
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					sql, _ := strconv.Unquote(n.Value)
					record(n, sql)
				}
			case *ast.BinaryExpr:
				if n.Op != token.ADD {
					return true
				}
				// A statement split around an expression ("... " + x +
				// " ..."): its literal parts are read joined, the other
				// parts on their own.
				var sql strings.Builder
				for _, part := range terms(n) {
					if lit, ok := part.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						sql.WriteString(s)
						continue
					}
					sql.WriteString(" ? ")
					ast.Inspect(part, visit)
				}
				record(n, sql.String())
				return false
			}
			return true
		}
		ast.Inspect(f, visit)
		return nil
	})
	if err != nil {
		t.Fatalf("read the server's code: %v", err)
	}
	return out
}

// terms are the operands of a + chain, in order.
func terms(e ast.Expr) []ast.Expr {
	switch e := e.(type) {
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			return append(terms(e.X), terms(e.Y)...)
		}
	case *ast.ParenExpr:
		return terms(e.X)
	}
	return []ast.Expr{e}
}

var createTable = regexp.MustCompile(`(?i)\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)
var dropTable = regexp.MustCompile(`(?i)\bDROP\s+TABLE\s+(?:IF\s+EXISTS\s+)?([a-z_][a-z0-9_]*)`)

// migrated is every table the migrations create and keep.
func migrated(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations under %s (%v)", dir, err)
	}
	sort.Strings(files)
	tables := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range createTable.FindAllStringSubmatch(string(b), -1) {
			tables[strings.ToLower(m[1])] = true
		}
		for _, m := range dropTable.FindAllStringSubmatch(string(b), -1) {
			delete(tables, strings.ToLower(m[1]))
		}
	}
	return tables
}

// TestOneOwnerPerTable: every table is written by its owner only.
func TestOneOwnerPerTable(t *testing.T) {
	tables := migrated(t, filepath.Join("..", "..", "..", "migrations"))
	for table := range tables {
		if _, ok := owner[table]; !ok {
			t.Errorf("table %s has no owner: add it to owner in owners_test.go", table)
		}
	}
	for table := range owner {
		if !tables[table] {
			t.Errorf("owner lists %s, which no migration creates (or one drops)", table)
		}
	}
	sites := found(t, "..", tables)
	var names []string
	for table := range sites {
		names = append(names, table)
	}
	sort.Strings(names)
	for _, table := range names {
		var elsewhere []string
		for _, s := range sites[table] {
			if s.pkg != owner[table] {
				elsewhere = append(elsewhere, s.at)
			}
		}
		if len(elsewhere) > 0 {
			t.Errorf("table %s is owned by %s but written at %s: call a function of %s instead",
				table, owner[table], strings.Join(elsewhere, ", "), owner[table])
		}
	}
}

// TestWritesFound: the scanner sees the statements it must, and no
// locking clause or upsert as a write of its own.
func TestWritesFound(t *testing.T) {
	for sql, want := range map[string]string{
		`INSERT INTO sessions (id) VALUES ($1)`:                                       "sessions",
		"UPDATE sessions s SET runner_id = NULL\n\tFROM agent_groups g":               "sessions",
		`update runner_pushes set acked_at = now()`:                                   "runner_pushes",
		`DELETE FROM holds WHERE id = $1`:                                             "holds",
		`TRUNCATE TABLE fact_changes`:                                                 "fact_changes",
		`TRUNCATE ONLY "tokens"`:                                                      "tokens",
		`WITH ins AS (INSERT INTO messaging_groups AS m (id) VALUES ($1)) SELECT 1`:   "messaging_groups",
		`INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET name = $2`: "users",
		`SELECT 1 FROM pending_channel_registrations WHERE id = $1 FOR UPDATE OF p`:   "",
		`SELECT 1 FROM holds FOR UPDATE SKIP LOCKED`:                                  "",
		`SELECT 1 FROM holds FOR NO KEY UPDATE`:                                       "",
	} {
		got := strings.Join(writes(sql), ",")
		if got != want {
			t.Errorf("writes(%q) = %q, want %q", sql, got, want)
		}
	}
}

// TestBuiltTargetsFound: a table named at run time is seen as such.
func TestBuiltTargetsFound(t *testing.T) {
	for sql, want := range map[string]bool{
		`DELETE FROM %s WHERE at < $1`:          true,
		"INSERT INTO  ? (id) VALUES ($1)":       true,
		`UPDATE %s SET x = 1`:                   true,
		`TRUNCATE TABLE %s`:                     true,
		`UPDATE holds SET x = 1 WHERE id = ?`:   false,
		`DELETE FROM holds WHERE id = ANY($1)`:  false,
		`SELECT 1 FROM holds WHERE note = '%s'`: false,
		`INSERT INTO holds (id) VALUES ($1)`:    false,
	} {
		if got := builtTarget.MatchString(sql); got != want {
			t.Errorf("builtTarget(%q) = %v, want %v", sql, got, want)
		}
	}
}
