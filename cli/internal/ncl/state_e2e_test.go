package ncl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// applyFile runs ncl apply on a document written to a file.
func (s *realServer) applyFile(t *testing.T, doc string, args ...string) result {
	t.Helper()
	f := filepath.Join(t.TempDir(), "state.yaml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return s.ncl(t, append([]string{"apply", "-f", f}, args...)...)
}

// Issue 33: config as code. An export applied back changes nothing; an
// edited document applies exactly its changes, deletions only with --prune;
// a second apply is a no-op.
func TestExportAndApplyRoundTrip(t *testing.T) {
	srv := startRealServer(t)
	for _, args := range [][]string{
		{"users", "create", "telegram:dana", "--display-name", "Dana"},
		{"users", "create", "telegram:erin"},
		{"groups", "create", "--name", "research", "--cli-scope", "group"},
		{"groups", "create", "--name", "ops", "--cli-scope", "disabled", "--pinned-host", "h1"},
		{"destinations", "add", "--group", "research", "--name", "ops", "--target-group", "ops"},
		{"destinations", "add", "--group", "ops", "--name", "research", "--target-group", "research"},
		{"policies", "set", "--from", "research", "--to", "ops", "--approver", "telegram:dana"},
		{"roles", "grant", "--user", "telegram:dana", "--role", "admin", "--scope", "group", "--group", "research"},
		{"catalog", "set", "--action", "a2a.send", "--approvals", "2"},
	} {
		srv.must(t, args...)
	}
	exported := srv.must(t, "export")
	for _, want := range []string{"apiVersion: clawguard/v1", "name: research", "pinnedHost: h1", "target: ops",
		"- telegram:dana", "role: admin", "group: research", "action: a2a.send", "approvals: 2", "name: Dana"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if strings.Contains(exported, "ag_") {
		t.Errorf("export names a group by id:\n%s", exported)
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("export | apply --dry-run: exit %d, %q, want no changes", r.code, r.out)
	}

	edited := strings.Replace(exported, "approvals: 2", "approvals: 3", 1)
	edited = strings.Replace(edited, "cliScope: disabled", "cliScope: group", 1)
	edited = strings.Replace(edited, "  - group: ops\n    name: research\n    target: research\n", "", 1)
	edited = strings.Replace(edited, "groups:\n", "groups:\n  - name: billing\n    cliScope: disabled\n", 1)
	dry := srv.applyFile(t, edited, "--dry-run")
	wantLines := []string{"+ group billing", "~ group ops: cliScope disabled → group", "~ catalog a2a.send: approvals 2 → 3, mode enforce → enforce, step-up false → false",
		"not deleted without --prune: destination ops/research", "3 change(s); none made (--dry-run)."}
	for _, w := range wantLines {
		if !strings.Contains(dry.out, w) {
			t.Errorf("dry run lacks %q:\n%s", w, dry.out)
		}
	}
	if strings.Count(dry.out, "\n") != len(wantLines) {
		t.Errorf("dry run says more than the edit:\n%s", dry.out)
	}
	if after := srv.must(t, "export"); after != exported {
		t.Fatalf("a dry run changed the server:\n%s", after)
	}

	if r := srv.applyFile(t, edited); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.out, r.err)
	}
	after := srv.must(t, "export")
	for _, want := range []string{"name: billing", "approvals: 3", "target: research"} {
		if !strings.Contains(after, want) {
			t.Errorf("after apply, export lacks %q:\n%s", want, after)
		}
	}
	if r := srv.applyFile(t, edited); r.code != 0 || !strings.Contains(r.out, "No changes.") {
		t.Errorf("second apply: exit %d, %q, want no changes (idempotent)", r.code, r.out)
	}
	if r := srv.applyFile(t, edited, "--prune"); r.code != 0 || !strings.Contains(r.out, "- destination ops/research") {
		t.Fatalf("apply --prune: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if final := srv.must(t, "export"); final != edited {
		t.Errorf("after --prune the export is not the document:\n%s\nwant:\n%s", final, edited)
	}
}

// A document is refused whole, before any change, for an unknown field (with
// its line), a wrong version, or a name listed twice.
func TestApplyRefusesAnUnclearDocument(t *testing.T) {
	srv := startRealServer(t)
	for name, tc := range map[string]struct{ doc, want string }{
		"unknown field":  {"apiVersion: clawguard/v1\ngroups:\n  - name: x\n    cliScope: group\n    pinedHost: h\n", "line 5"},
		"wrong version":  {"apiVersion: clawguard/v2\n", "apiVersion"},
		"listed twice":   {"apiVersion: clawguard/v1\ngroups:\n  - name: x\n    cliScope: group\n  - name: x\n    cliScope: group\n", "listed twice"},
		"empty document": {"", "empty"},
	} {
		r := srv.applyFile(t, tc.doc)
		if r.code != ExitUsage || !strings.Contains(r.err, tc.want) {
			t.Errorf("%s: exit %d %q, want a usage error saying %q", name, r.code, r.err, tc.want)
		}
	}
	if out := srv.must(t, "groups", "list", "-q"); strings.TrimSpace(out) != "" {
		t.Errorf("a refused document changed the server: %q", out)
	}
}

// A change the server holds for approval is reported with its hold, however
// the call wrapped the status.
func TestHeldChangeIsRecognisedByItsHold(t *testing.T) {
	st, _ := status.New(codes.FailedPrecondition, "held").WithDetails(&guardv1.ApprovalPending{HoldId: "hold_1"})
	for _, err := range []error{st.Err(), fmt.Errorf("group x: %w", st.Err())} {
		if hold, ok := heldAs(err); !ok || hold != "hold_1" {
			t.Errorf("%v: held as %q %v, want hold_1", err, hold, ok)
		}
	}
	if _, ok := heldAs(errors.New("refused")); ok {
		t.Error("a plain error read as held")
	}
	if _, ok := heldAs(status.Error(codes.FailedPrecondition, "no detail")); ok {
		t.Error("a precondition without ApprovalPending read as held")
	}
}

// Issue 32: ncl freeze / unfreeze / freezes list against the real server,
// a group by name; one scope flag, exactly.
func TestFreezeFromTheCommandLine(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group")
	out := srv.must(t, "freeze", "--group", "research", "--reason", "incident 42")
	if !strings.Contains(out, "group") || !strings.Contains(out, "incident 42") {
		t.Errorf("freeze printed:\n%s", out)
	}
	if list := srv.must(t, "freezes", "list"); !strings.Contains(list, "research") || !strings.Contains(list, "operator") {
		t.Errorf("freezes list:\n%s", list)
	}
	if r := srv.ncl(t, "freeze", "--all", "--group", "research"); r.code != ExitUsage {
		t.Errorf("two scopes: exit %d %q, want a usage error", r.code, r.err)
	}
	if r := srv.ncl(t, "freeze"); r.code != ExitUsage {
		t.Errorf("no scope: exit %d %q, want a usage error", r.code, r.err)
	}
	if r := srv.ncl(t, "freeze", "--group", "nowhere"); r.code == 0 {
		t.Errorf("an unknown group was frozen: %q", r.out)
	}
	if out := srv.must(t, "unfreeze", "--group", "research"); !strings.Contains(out, "unfrozen (frozen by operator") {
		t.Errorf("unfreeze printed %q", out)
	}
	if list := strings.TrimSpace(srv.must(t, "freezes", "list", "-q")); list != "" {
		t.Errorf("after unfreeze, freezes list -q = %q", list)
	}
}

// Issue 33: chats (messaging groups), wirings, members and destinations to
// a chat are in the document too: exported by key and name, applied back as
// no change, an edit applies exactly its changes, deletions only with --prune.
func TestExportAndApplyChatsWiringsMembers(t *testing.T) {
	srv := startRealServer(t)
	srv.must(t, "users", "create", "telegram:dana")
	srv.must(t, "users", "create", "telegram:erin")
	research := jsonObj(t, srv.must(t, "groups", "create", "--name", "research", "--cli-scope", "group", "-o", "json"))["id"].(string)
	chat := jsonObj(t, srv.must(t, "messaging-groups", "create", "--channel-type", "telegram", "--platform-id", "-100123",
		"--name", "ops room", "--unknown-sender-policy", "strict", "--group-chat", "-o", "json"))["id"].(string)
	srv.must(t, "wirings", "create", "--messaging-group", chat, "--group", research)
	srv.must(t, "members", "add", "--group", research, "--user", "telegram:dana")
	srv.must(t, "destinations", "add", "--group", "research", "--name", "room", "--target-messaging-group", chat)
	srv.must(t, "groups", "packages", "add", research, "jq", "curl", "--manager", "apt")
	srv.must(t, "groups", "mcp", "add", research, "--name", "files", "--command", "mcp-files", "--arg", "/data", "--env", "LOG=debug")

	exported := srv.must(t, "export")
	for _, want := range []string{"messagingGroups:", "channelType: telegram", `platformId: "-100123"`, "name: ops room",
		"unknownSenderPolicy: strict", "groupChat: true", "wirings:", "chat: telegram/-100123", "members:", "user: telegram:dana",
		"name: room\n    chat: telegram/-100123", "aptPackages:\n      - curl\n      - jq\n",
		"mcpServers:\n      - name: files\n        command: mcp-files\n        args:\n          - /data\n        env:\n          LOG: <redacted>\n"} {
		if !strings.Contains(exported, want) {
			t.Errorf("export lacks %q:\n%s", want, exported)
		}
	}
	if strings.Contains(exported, "mg_") || strings.Contains(exported, "ag_") {
		t.Errorf("export names something by id:\n%s", exported)
	}
	if r := srv.applyFile(t, exported, "--dry-run"); r.code != 0 || strings.TrimSpace(r.out) != "No changes." {
		t.Fatalf("export | apply --dry-run: exit %d, %q, want no changes", r.code, r.out)
	}

	// A second chat wired to research, its policy changed on the first,
	// erin a member, dana's membership and the wiring of the first dropped.
	edited := strings.Replace(exported, "unknownSenderPolicy: strict", "unknownSenderPolicy: public", 1)
	edited = strings.Replace(edited, "messagingGroups:\n", "messagingGroups:\n  - channelType: slack\n    platformId: C042\n    name: alerts\n    unknownSenderPolicy: request_approval\n", 1)
	edited = strings.Replace(edited, "wirings:\n  - chat: telegram/-100123\n    group: research\n", "wirings:\n  - chat: slack/C042\n    group: research\n", 1)
	edited = strings.Replace(edited, "user: telegram:dana", "user: telegram:erin", 1)
	edited = strings.Replace(edited, "      - jq\n", "    npmPackages:\n      - typescript\n", 1)
	// An env value is write-only: the document sets it by writing it.
	edited = strings.Replace(edited, "LOG: <redacted>", "LOG: info", 1)
	dry := srv.applyFile(t, edited, "--dry-run")
	wantLines := []string{"+ messaging group slack/C042 (alerts)",
		`~ messaging group telegram/-100123: name "ops room" → "ops room", unknownSenderPolicy strict → public`,
		"+ member telegram:erin in research", "+ wiring slack/C042 → research",
		"+ npm packages of group research: typescript", "not deleted without --prune: apt package jq of group research",
		"~ mcp server files of group research: mcp-files /data (env LOG set from the document)",
		"not deleted without --prune: member telegram:dana in research",
		"not deleted without --prune: wiring telegram/-100123 → research",
		"6 change(s); none made (--dry-run)."}
	for _, w := range wantLines {
		if !strings.Contains(dry.out, w) {
			t.Errorf("dry run lacks %q:\n%s", w, dry.out)
		}
	}
	if strings.Count(dry.out, "\n") != len(wantLines) {
		t.Errorf("dry run says more than the edit:\n%s", dry.out)
	}
	if after := srv.must(t, "export"); after != exported {
		t.Fatalf("a dry run changed the server:\n%s", after)
	}
	if r := srv.applyFile(t, edited); r.code != 0 {
		t.Fatalf("apply: exit %d\n%s%s", r.code, r.out, r.err)
	}
	// Set, the value reads back as the reference that keeps it.
	edited = strings.Replace(edited, "LOG: info", "LOG: <redacted>", 1)
	if r := srv.applyFile(t, edited); r.code != 0 || !strings.Contains(r.out, "No changes.") {
		t.Errorf("second apply: exit %d, %q, want no changes (idempotent)", r.code, r.out)
	}
	r := srv.applyFile(t, edited, "--prune")
	if r.code != 0 || !strings.Contains(r.out, "- wiring telegram/-100123 → research") || !strings.Contains(r.out, "- member telegram:dana in research") ||
		!strings.Contains(r.out, "- apt package jq of group research") {
		t.Fatalf("apply --prune: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if final := srv.must(t, "export"); final != edited {
		t.Errorf("after --prune the export is not the document:\n%s\nwant:\n%s", final, edited)
	}

	// Pruning a chat removes what names it first (its destination), then it.
	gone := strings.Replace(edited, "  - channelType: telegram\n    platformId: \"-100123\"\n    name: ops room\n    unknownSenderPolicy: public\n    groupChat: true\n", "", 1)
	gone = strings.Replace(gone, "destinations:\n  - group: research\n    name: room\n    chat: telegram/-100123\n", "", 1)
	if gone == edited {
		t.Fatalf("the test's edit did not apply to:\n%s", edited)
	}
	r = srv.applyFile(t, gone, "--prune")
	if r.code != 0 || strings.Index(r.out, "- destination research/room") > strings.Index(r.out, "- messaging group telegram/-100123") ||
		!strings.Contains(r.out, "- messaging group telegram/-100123") {
		t.Fatalf("apply --prune of a chat: exit %d\n%s%s", r.code, r.out, r.err)
	}
	if final := srv.must(t, "export"); final != gone {
		t.Errorf("after pruning the chat the export is not the document:\n%s\nwant:\n%s", final, gone)
	}
}
