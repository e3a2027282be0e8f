package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Catalog actions a runner applies through ApplyAction.
const (
	ActionCreateAgent     = "agents.create"
	ActionInstallPackages = "self_mod.install_packages"
	ActionAddMcpServer    = "self_mod.add_mcp_server"
	ActionA2ASend         = "a2a.send"
)

// selfModPrefix marks the actions the guard always holds for approval.
const selfModPrefix = "self_mod."

type applyFunc func(ctx context.Context, tx pgx.Tx, sess appliedSession, req *guardv1.ApplyActionRequest) (map[string]any, string, error)

type appliedSession struct{ id, groupID string }

var appliers = map[string]applyFunc{
	ActionCreateAgent:     applyCreateAgent,
	ActionInstallPackages: applyInstallPackages,
	ActionAddMcpServer:    applyAddMcpServer,
	ActionA2ASend:         applyA2ASend,
}

// AppliedActions lists the catalog actions ApplyAction performs.
func AppliedActions() []string {
	out := make([]string, 0, len(appliers))
	for a := range appliers {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

// ApplyAction performs a mutation on an agent's behalf. The runner must own
// the session and cite a fresh, unused ALLOW decision for this session and
// action; the citation is consumed and the mutation made in one transaction
// (a failed mutation leaves the citation unused). agentSession is the
// session the caller asserted with x-clawguard-session ("" when none).
func (s *Service) ApplyAction(ctx context.Context, runnerID, agentSession string, req *guardv1.ApplyActionRequest) (*guardv1.ApplyActionResponse, error) {
	switch {
	case req.GetSessionId() == "":
		return nil, status.Error(codes.InvalidArgument, "session_id: required")
	case req.GetAction() == "":
		return nil, status.Error(codes.InvalidArgument, "action: required")
	case req.GetDecisionId() == "":
		return nil, status.Error(codes.InvalidArgument, "decision_id: required (a mutation must cite the ALLOW decision that authorized it)")
	case agentSession != "" && agentSession != req.GetSessionId():
		return nil, status.Errorf(codes.PermissionDenied, "session_id %q is not the asserted agent session", req.GetSessionId())
	}
	apply, ok := appliers[req.GetAction()]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "action: %q is not applied through the registry (one of %s)", req.GetAction(), strings.Join(AppliedActions(), ", "))
	}
	var (
		result map[string]any
		msg    string
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var sess appliedSession
		var owner string
		err := tx.QueryRow(ctx, `SELECT id, agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1`, req.GetSessionId()).Scan(&sess.id, &sess.groupID, &owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return status.Errorf(codes.PermissionDenied, "runner %q does not host session %q", runnerID, req.GetSessionId())
		}
		if err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		grant, mode, err := citeTx(ctx, tx, req.GetDecisionId(), sess.id, req.GetAction(), s.opts.CitationWindow)
		if err != nil {
			return err
		}
		// The guard always holds self-modification, so a genuine ALLOW for it
		// consumed an approved hold — unless its gate is in audit or warn
		// mode, re-checked live here (a switch back to enforce wins).
		if grant == "" && strings.HasPrefix(req.GetAction(), selfModPrefix) {
			relaxed, err := relaxedNowTx(ctx, tx, mode, req.GetAction(), "", "")
			if err != nil {
				return err
			}
			if !relaxed {
				return status.Errorf(codes.FailedPrecondition, "citation refused: decision %q: a %s ALLOW must carry the grant of an approved hold, and this one has none", req.GetDecisionId(), req.GetAction())
			}
		}
		if err := boundToDecisionTx(ctx, tx, sess, grant, mode, req); err != nil {
			return err
		}
		if result, msg, err = apply(ctx, tx, sess, req); err != nil {
			return err
		}
		return eventTx(ctx, tx, sess.id, "out", "action", map[string]any{
			"action": req.GetAction(), "decision_id": req.GetDecisionId(), "result": result,
		})
	})
	if err != nil {
		return nil, err
	}
	st, err := structpb.NewStruct(result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &guardv1.ApplyActionResponse{Result: st, Message: msg}, nil
}

// citeTx consumes a citation: one conditional UPDATE, so a decision is
// cited at most once whatever the concurrency. It returns the grant the
// ALLOW consumed ("" for a baseline allow). On refusal it says why.
func citeTx(ctx context.Context, tx pgx.Tx, decisionID, sessionID, action string, window time.Duration) (grant, mode string, err error) {
	err = tx.QueryRow(ctx, `UPDATE decisions SET cited_at = now()
		WHERE id = $1 AND cited_at IS NULL AND effect = 'allow' AND NOT dry_run
		  AND session_id = $2 AND action = $3 AND at > now() - $4::interval
		RETURNING grant_id, mode`,
		decisionID, sessionID, action, window).Scan(&grant, &mode)
	if err == nil {
		return grant, mode, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return "", "", fmt.Errorf("cite decision: %w", err)
	}
	return "", "", citationRefused(ctx, tx, decisionID, sessionID, action, window)
}

// relaxedNowTx reports whether a grantless ALLOW that an audit or warn mode
// gave (mode, from the cited decision) may still apply: the gate's mode is
// re-read live — a message policy's own mode for the pair from → to, else
// the action's — so an operator's switch back to enforce refuses it.
func relaxedNowTx(ctx context.Context, tx pgx.Tx, mode, action, from, to string) (bool, error) {
	if mode == "" {
		return false, nil
	}
	var live string
	err := tx.QueryRow(ctx, `SELECT COALESCE(
			NULLIF((SELECT mode FROM agent_message_policies WHERE from_agent_group_id = $2 AND to_agent_group_id = $3), ''),
			(SELECT mode FROM action_settings WHERE action = $1), 'enforce')`, action, from, to).Scan(&live)
	if err != nil {
		return false, fmt.Errorf("read enforcement mode: %w", err)
	}
	return live == "audit" || live == "warn", nil
}

// citationRefused says why a citation did not match.
func citationRefused(ctx context.Context, tx pgx.Tx, decisionID, sessionID, action string, window time.Duration) error {
	var (
		effect, dAction, dSession string
		dryRun, cited, stale      bool
	)
	err := tx.QueryRow(ctx, `SELECT effect, action, COALESCE(session_id, ''), dry_run, cited_at IS NOT NULL, at <= now() - $2::interval
		FROM decisions WHERE id = $1`, decisionID, window).Scan(&effect, &dAction, &dSession, &dryRun, &cited, &stale)
	if errors.Is(err, pgx.ErrNoRows) {
		return status.Errorf(codes.FailedPrecondition, "citation refused: decision %q not found", decisionID)
	}
	if err != nil {
		return fmt.Errorf("read cited decision: %w", err)
	}
	why := "unknown"
	switch {
	case dSession != sessionID:
		return status.Errorf(codes.PermissionDenied, "citation refused: decision %q was made for another session", decisionID)
	case effect != "allow":
		why = "it is a " + effect + ", not an allow"
	case dryRun:
		why = "it is a dry run"
	case dAction != action:
		why = fmt.Sprintf("it authorized %q, not %q", dAction, action)
	case cited:
		why = "it was already cited (single use)"
	case stale:
		why = fmt.Sprintf("it is older than the citation window (%s)", window)
	}
	return status.Errorf(codes.FailedPrecondition, "citation refused: decision %q: %s", decisionID, why)
}

// boundToDecisionTx binds the applied payload to what was decided: a
// citation names session and action only, so without this a runner could
// cite an ALLOW and apply another payload. An ALLOW that consumed a grant
// applies exactly the approved hold's payload (a2a: plus the message id the
// runner stamps); an a2a send is to the payload's own target, and a send
// into a message-policy pair needs an approval (a grantless ALLOW for
// another target does not carry over) unless that pair's gate is in audit
// or warn mode now.
func boundToDecisionTx(ctx context.Context, tx pgx.Tx, sess appliedSession, grant, mode string, req *guardv1.ApplyActionRequest) error {
	if req.GetAction() == ActionA2ASend {
		target, err := a2aTarget(req)
		if err != nil {
			return err
		}
		if grant == "" && target != sess.groupID { // a self-send is never gated (the baseline's order)
			var gated bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_message_policies
				WHERE from_agent_group_id = $1 AND to_agent_group_id = $2)`, sess.groupID, target).Scan(&gated); err != nil {
				return fmt.Errorf("check message policy: %w", err)
			}
			if gated {
				// A policy rolled out in audit or warn lets the send run
				// without an approval, if it still is (for this target).
				relaxed, err := relaxedNowTx(ctx, tx, mode, ActionA2ASend, sess.groupID, target)
				if err != nil {
					return err
				}
				gated = !relaxed
			}
			if gated {
				return status.Errorf(codes.PermissionDenied, "a message from %q to %q needs an approval: the cited decision carries none", sess.groupID, target)
			}
		}
	}
	if grant == "" {
		return nil
	}
	var raw []byte
	if err := tx.QueryRow(ctx, `SELECT payload FROM holds WHERE id = $1`, grant).Scan(&raw); err != nil {
		return fmt.Errorf("read approved hold %s: %w", grant, err)
	}
	var approved map[string]any
	if err := json.Unmarshal(raw, &approved); err != nil {
		return fmt.Errorf("decode approved hold %s: %w", grant, err)
	}
	b, err := req.GetPayload().MarshalJSON()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "payload: %v", err)
	}
	applied := map[string]any{}
	if err := json.Unmarshal(b, &applied); err != nil {
		return status.Errorf(codes.InvalidArgument, "payload: %v", err)
	}
	if _, had := approved["id"]; req.GetAction() == ActionA2ASend && !had {
		delete(applied, "id")
	}
	if approved == nil {
		approved = map[string]any{}
	}
	if !reflect.DeepEqual(approved, applied) {
		return status.Errorf(codes.PermissionDenied, "payload differs from the one approved in hold %s", grant)
	}
	return nil
}

// ---- the mutations ----

var nonAlnum = regexp.MustCompile(`[^a-z0-9]+`)

// normalizeName is the seed's destination-name normalization.
func normalizeName(s string) string { return nonAlnum.ReplaceAllString(strings.ToLower(s), "-") }

func str(req *guardv1.ApplyActionRequest, key string) string {
	if v, ok := req.GetPayload().GetFields()[key]; ok {
		return strings.TrimSpace(v.GetStringValue())
	}
	return ""
}

// MaxInstructions bounds create_agent's instructions (the runner's precheck
// says the same before a hold is made).
const MaxInstructions = 16 << 10

// applyCreateAgent creates the group with its instructions (its agent starts
// with them), its container config (default cli_scope group) and the seed's
// bidirectional destinations: creator → new (named after it), new → creator
// ("parent").
func applyCreateAgent(ctx context.Context, tx pgx.Tx, sess appliedSession, req *guardv1.ApplyActionRequest) (map[string]any, string, error) {
	name := str(req, "name")
	if name == "" {
		return nil, "", status.Error(codes.InvalidArgument, "payload.name: required")
	}
	instructions := str(req, "instructions")
	if len(instructions) > MaxInstructions {
		return nil, "", status.Errorf(codes.InvalidArgument, "payload.instructions: longer than %d bytes", MaxInstructions)
	}
	id := newID("ag_")
	if _, err := tx.Exec(ctx, `INSERT INTO agent_groups (id, name, instructions) VALUES ($1, $2, $3)`, id, name, instructions); err != nil {
		if store.IsUniqueViolation(err) {
			return nil, "", status.Errorf(codes.AlreadyExists, "agent group named %q already exists", name)
		}
		return nil, "", fmt.Errorf("create agent group: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO container_configs (agent_group_id) VALUES ($1)`, id); err != nil {
		return nil, "", fmt.Errorf("create container config: %w", err)
	}
	local, err := freeDestinationName(ctx, tx, sess.groupID, normalizeName(name))
	if err != nil {
		return nil, "", err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO agent_destinations (agent_group_id, name, target_agent_group_id) VALUES ($1, $2, $3), ($3, 'parent', $1)`,
		sess.groupID, local, id); err != nil {
		return nil, "", fmt.Errorf("create destinations: %w", err)
	}
	return map[string]any{"agent_group_id": id, "name": name, "destination": local, "instructions": instructions},
		fmt.Sprintf("Agent %q created; message it as %q.", name, local), nil
}

// freeDestinationName is base, or base-2, base-3… when taken.
func freeDestinationName(ctx context.Context, tx pgx.Tx, groupID, base string) (string, error) {
	if base == "" || base == "-" {
		base = "agent"
	}
	for i := 1; i < 1000; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		var taken bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_destinations WHERE agent_group_id = $1 AND name = $2)`, groupID, name).Scan(&taken); err != nil {
			return "", fmt.Errorf("check destination name: %w", err)
		}
		if !taken {
			return name, nil
		}
	}
	return "", status.Errorf(codes.ResourceExhausted, "no free destination name for %q", base)
}

var (
	aptName = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*$`)
	npmName = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$`)
)

func strList(req *guardv1.ApplyActionRequest, key string) ([]string, error) {
	v, ok := req.GetPayload().GetFields()[key]
	if !ok {
		return nil, nil
	}
	if _, null := v.GetKind().(*structpb.Value_NullValue); null {
		return nil, nil
	}
	list, isList := v.GetKind().(*structpb.Value_ListValue)
	if !isList {
		return nil, status.Errorf(codes.InvalidArgument, "payload.%s: must be a list of strings", key)
	}
	var out []string
	for _, e := range list.ListValue.GetValues() {
		sv, ok := e.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "payload.%s: every entry must be a string", key)
		}
		out = append(out, sv.StringValue)
	}
	return out, nil
}

// lockConfigTx reads (creating if missing) a group's container config for update.
func lockConfigTx(ctx context.Context, tx pgx.Tx, groupID string) (apt, npm []string, mcp []map[string]any, err error) {
	if _, err = tx.Exec(ctx, `INSERT INTO container_configs (agent_group_id) VALUES ($1) ON CONFLICT DO NOTHING`, groupID); err != nil {
		return nil, nil, nil, fmt.Errorf("ensure container config: %w", err)
	}
	var raw []byte
	err = tx.QueryRow(ctx, `SELECT apt_packages, npm_packages, mcp_servers FROM container_configs WHERE agent_group_id = $1 FOR UPDATE`, groupID).Scan(&apt, &npm, &raw)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("read container config: %w", err)
	}
	if err = json.Unmarshal(raw, &mcp); err != nil {
		return nil, nil, nil, fmt.Errorf("decode mcp_servers: %w", err)
	}
	return apt, npm, mcp, nil
}

// restartGroupTx enqueues a RestartContainer push for every active session of the group.
func restartGroupTx(ctx context.Context, tx pgx.Tx, groupID, reason string, rebuild bool, version int64) ([]string, error) {
	rows, err := tx.Query(ctx, `SELECT id FROM sessions WHERE agent_group_id = $1 AND status = 'active' ORDER BY created_at`, groupID)
	if err != nil {
		return nil, fmt.Errorf("list group sessions: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list group sessions: %w", err)
	}
	var pushIDs []string
	for _, id := range ids {
		pid, err := pushes.EnqueueTx(ctx, tx, id, &guardv1.Push{Body: &guardv1.Push_Restart{Restart: &guardv1.RestartContainer{
			Reason: reason, RebuildImage: rebuild, ConfigVersion: version,
		}}})
		if err != nil {
			return nil, err
		}
		pushIDs = append(pushIDs, pid)
	}
	return pushIDs, nil
}

func applyInstallPackages(ctx context.Context, tx pgx.Tx, sess appliedSession, req *guardv1.ApplyActionRequest) (map[string]any, string, error) {
	addApt, err := strList(req, "apt")
	if err != nil {
		return nil, "", err
	}
	addNpm, err := strList(req, "npm")
	if err != nil {
		return nil, "", err
	}
	if n := len(addApt) + len(addNpm); n < 1 || n > 20 {
		return nil, "", status.Errorf(codes.InvalidArgument, "payload: 1 to 20 packages (apt, npm), got %d", n)
	}
	for _, p := range addApt {
		if !aptName.MatchString(p) {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.apt: invalid package name %q", p)
		}
	}
	for _, p := range addNpm {
		if !npmName.MatchString(p) {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.npm: invalid package name %q", p)
		}
	}
	apt, npm, _, err := lockConfigTx(ctx, tx, sess.groupID)
	if err != nil {
		return nil, "", err
	}
	apt, npm = union(apt, addApt), union(npm, addNpm)
	var version int64
	err = tx.QueryRow(ctx, `UPDATE container_configs SET apt_packages = $2, npm_packages = $3, version = version + 1, updated_at = now()
		WHERE agent_group_id = $1 RETURNING version`, sess.groupID, apt, npm).Scan(&version)
	if err != nil {
		return nil, "", fmt.Errorf("update container config: %w", err)
	}
	added := append(prefixed("apt: ", addApt), prefixed("npm: ", addNpm)...)
	pushIDs, err := restartGroupTx(ctx, tx, sess.groupID, "packages installed: "+strings.Join(added, ", "), true, version)
	if err != nil {
		return nil, "", err
	}
	return map[string]any{"config_version": version, "apt": toAny(apt), "npm": toAny(npm), "restart_pushes": toAny(pushIDs)},
		fmt.Sprintf("Packages added (%s); the image is rebuilt and the container restarts.", strings.Join(added, ", ")), nil
}

func applyAddMcpServer(ctx context.Context, tx pgx.Tx, sess appliedSession, req *guardv1.ApplyActionRequest) (map[string]any, string, error) {
	name, command := str(req, "name"), str(req, "command")
	if name == "" {
		return nil, "", status.Error(codes.InvalidArgument, "payload.name: required")
	}
	if command == "" {
		return nil, "", status.Error(codes.InvalidArgument, "payload.command: required")
	}
	args, err := strList(req, "args")
	if err != nil {
		return nil, "", err
	}
	env := map[string]any{}
	for k, v := range req.GetPayload().GetFields()["env"].GetStructValue().GetFields() {
		sv, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.env.%s: must be a string", k)
		}
		env[k] = sv.StringValue
	}
	_, _, mcp, err := lockConfigTx(ctx, tx, sess.groupID)
	if err != nil {
		return nil, "", err
	}
	entry := map[string]any{"name": name, "command": command, "args": toAny(args), "env": env}
	replaced := false
	for i, m := range mcp {
		if m["name"] == name {
			mcp[i], replaced = entry, true
		}
	}
	if !replaced {
		mcp = append(mcp, entry)
	}
	raw, err := json.Marshal(mcp)
	if err != nil {
		return nil, "", fmt.Errorf("encode mcp_servers: %w", err)
	}
	var version int64
	err = tx.QueryRow(ctx, `UPDATE container_configs SET mcp_servers = $2, version = version + 1, updated_at = now()
		WHERE agent_group_id = $1 RETURNING version`, sess.groupID, raw).Scan(&version)
	if err != nil {
		return nil, "", fmt.Errorf("update container config: %w", err)
	}
	// The MCP servers are part of the group image's manifest, so this is a
	// rebuild too; and as one, a runner already running this config version
	// (the requesting session, restarted by the replay itself) skips it
	// instead of restarting its agent a second time.
	pushIDs, err := restartGroupTx(ctx, tx, sess.groupID, "MCP server added: "+name, true, version)
	if err != nil {
		return nil, "", err
	}
	return map[string]any{"config_version": version, "mcp_server": name, "restart_pushes": toAny(pushIDs)},
		fmt.Sprintf("MCP server %q added; the container restarts.", name), nil
}

// applyA2ASend delivers an agent-to-agent message to the target group's
// active session (opened on a live runner if there is none; the target may
// be on another host). The destination ACL is re-checked here: a citation
// binds session and action, not the target.
func applyA2ASend(ctx context.Context, tx pgx.Tx, sess appliedSession, req *guardv1.ApplyActionRequest) (map[string]any, string, error) {
	target, err := a2aTarget(req)
	if err != nil {
		return nil, "", err
	}
	var exists, allowed bool
	err = tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM agent_groups WHERE id = $2),
		$1 = $2 OR EXISTS (SELECT 1 FROM agent_destinations WHERE agent_group_id = $1 AND target_agent_group_id = $2)`,
		sess.groupID, target).Scan(&exists, &allowed)
	if err != nil {
		return nil, "", fmt.Errorf("check destination: %w", err)
	}
	if !exists {
		return nil, "", status.Errorf(codes.NotFound, "target agent group %q not found", target)
	}
	if !allowed {
		return nil, "", status.Errorf(codes.PermissionDenied, "group %q has no destination for %q", sess.groupID, target)
	}
	text := str(req, "text")
	if text == "" {
		if c, ok := req.GetPayload().GetFields()["content"]; ok {
			if sv, ok := c.GetKind().(*structpb.Value_StringValue); ok {
				text = sv.StringValue
			} else if b, err := c.MarshalJSON(); err == nil {
				text = string(b)
			}
		}
	}
	messageID := str(req, "id")
	if messageID == "" {
		messageID = newID("msg_")
	}
	targetSession, err := FindOrOpenSessionTx(ctx, tx, target, "")
	if err != nil {
		return nil, "", err
	}
	pushID, err := pushes.EnqueueTx(ctx, tx, targetSession, &guardv1.Push{Body: &guardv1.Push_Deliver{Deliver: &guardv1.DeliverMessage{
		MessageId: messageID, FromAgentGroupId: sess.groupID, FromSessionId: sess.id, Text: text, Payload: req.GetPayload(),
	}}})
	if err != nil {
		return nil, "", err
	}
	if err := eventTx(ctx, tx, targetSession, "in", "message", map[string]any{
		"message_id": messageID, "from_agent_group_id": sess.groupID, "from_session_id": sess.id, "text": text,
	}); err != nil {
		return nil, "", err
	}
	return map[string]any{"message_id": messageID, "target_session_id": targetSession, "push_id": pushID},
		"Message delivered.", nil
}

// a2aTarget is the target group of a send: resource.to, else the payload's
// to (or the seed's platform_id). A resource naming another target than the
// payload is refused: the decision and the card were about the payload's.
func a2aTarget(req *guardv1.ApplyActionRequest) (string, error) {
	inPayload := str(req, "to")
	if inPayload == "" {
		inPayload = str(req, "platform_id")
	}
	target := req.GetResource()["to"]
	switch {
	case target == "":
		target = inPayload
	case inPayload != "" && inPayload != target:
		return "", status.Errorf(codes.InvalidArgument, "resource.to %q differs from the payload's target %q", target, inPayload)
	}
	if target == "" {
		return "", status.Error(codes.InvalidArgument, "resource.to: required (the target agent group id)")
	}
	return target, nil
}

func union(have, add []string) []string {
	out := append([]string{}, have...)
	for _, p := range add {
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

func prefixed(prefix string, xs []string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, prefix+x)
	}
	return out
}

func toAny(xs []string) []any {
	out := make([]any, 0, len(xs))
	for _, x := range xs {
		out = append(out, x)
	}
	return out
}
