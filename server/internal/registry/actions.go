package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
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
	"github.com/clawguard/clawguard/proto/pkgname"
	"github.com/clawguard/clawguard/server/internal/a2a"
	"github.com/clawguard/clawguard/server/internal/agents"
	"github.com/clawguard/clawguard/server/internal/guard"
	"github.com/clawguard/clawguard/server/internal/pushes"
	"github.com/clawguard/clawguard/server/internal/resources"
	"github.com/clawguard/clawguard/server/internal/selfmod"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Catalog actions a runner applies through ApplyAction: the names the
// domains register their entries under, not copies of them.
const (
	ActionCreateAgent     = agents.Action
	ActionInstallPackages = selfmod.InstallAction
	ActionAddMcpServer    = selfmod.MCPAction
	ActionA2ASend         = a2a.Action
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
// (a failed mutation leaves the citation unused). The baseline is re-checked
// live in that transaction (D3 at apply): a stored answer, or an ALLOW
// decided before a revocation, is not applied past it.
//
// An ALLOW that consumed an approved hold's grant applies exactly that
// hold's payload, and only that decision can apply it. It is bound to the
// session, not to a runner: whichever runner hosts the session by then may
// cite it (a takeover runner finishes a dead runner's replay), past the
// citation window, until it has been applied once; citing it after that
// answers the recorded result and changes nothing. agentSession is the
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
	var out applied
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var sess appliedSession
		var owner string
		// The session row is locked: a move to another runner waits for
		// this application (and this one sees a finished move).
		err := tx.QueryRow(ctx, `SELECT id, agent_group_id, COALESCE(runner_id, '') FROM sessions WHERE id = $1 FOR SHARE`, req.GetSessionId()).Scan(&sess.id, &sess.groupID, &owner)
		if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != runnerID) {
			return status.Errorf(codes.PermissionDenied, "runner %q does not host session %q", runnerID, req.GetSessionId())
		}
		if err != nil {
			return fmt.Errorf("read session: %w", err)
		}
		c, err := readCitationTx(ctx, tx, req.GetDecisionId(), sess.id, req.GetAction(), s.opts.CitationWindow)
		if err != nil {
			return err
		}
		// The guard always holds self-modification, so a genuine ALLOW for it
		// consumed an approved hold — or was given by an audit or warn mode
		// (whether that mode still holds, recheckTx asks the baseline).
		if c.grant == "" && c.mode == "" && strings.HasPrefix(req.GetAction(), selfModPrefix) {
			return status.Errorf(codes.FailedPrecondition, "citation refused: decision %q: a %s ALLOW must carry the grant of an approved hold, and this one has none", req.GetDecisionId(), req.GetAction())
		}
		if err := boundToDecision(c, req); err != nil {
			return err
		}
		if c.hold != nil && c.hold.applied {
			// Applied once already (perhaps by the session's previous
			// runner): the same answer, nothing changes.
			out = c.hold.result
			return nil
		}
		if err := s.recheckTx(ctx, tx, sess, c, req); err != nil {
			return err
		}
		if out.Result, out.Message, err = apply(ctx, tx, sess, req); err != nil {
			return err
		}
		if err := markAppliedTx(ctx, tx, c, out); err != nil {
			return err
		}
		return eventTx(ctx, tx, sess.id, "out", "action", map[string]any{
			"action": req.GetAction(), "decision_id": req.GetDecisionId(), "result": out.Result,
		})
	})
	if err != nil {
		return nil, err
	}
	st, err := structpb.NewStruct(out.Result)
	if err != nil {
		return nil, fmt.Errorf("encode result: %w", err)
	}
	return &guardv1.ApplyActionResponse{Result: st, Message: out.Message}, nil
}

// applied is what an application returned (recorded on a hold, so a
// repeated citation of its consuming decision answers the same).
type applied struct {
	Result  map[string]any `json:"result"`
	Message string         `json:"message"`
}

// citation is a cited ALLOW decision, read and locked.
type citation struct {
	id, grant string
	mode      string        // the enforcement mode that relaxed a grantless ALLOW ("" = enforce)
	hold      *consumedHold // set when the decision consumed a hold's grant
}

// consumedHold is the approved hold a grant-carrying ALLOW consumed.
type consumedHold struct {
	id       string
	payload  map[string]any
	resource map[string]string
	applied  bool
	result   applied
}

// readCitationTx reads and locks the cited decision and, when it consumed
// a grant, the hold; it refuses (saying why) a decision that is missing,
// for another session or action, not an allow, a dry run, already cited or
// stale. A grant's consuming decision is exempt from single use and the
// window until its hold is applied (see ApplyAction); any other decision
// naming that grant is refused.
func readCitationTx(ctx context.Context, tx pgx.Tx, decisionID, sessionID, action string, window time.Duration) (citation, error) {
	var (
		effect, dAction, dSession, grant, mode string
		dryRun, cited, stale                   bool
	)
	err := tx.QueryRow(ctx, `SELECT effect, action, COALESCE(session_id, ''), dry_run, cited_at IS NOT NULL, at <= now() - $2::interval, grant_id, mode
		FROM decisions WHERE id = $1 FOR UPDATE`, decisionID, window).Scan(&effect, &dAction, &dSession, &dryRun, &cited, &stale, &grant, &mode)
	if errors.Is(err, pgx.ErrNoRows) {
		return citation{}, status.Errorf(codes.FailedPrecondition, "citation refused: decision %q not found", decisionID)
	}
	if err != nil {
		return citation{}, fmt.Errorf("read cited decision: %w", err)
	}
	refuse := func(why string) (citation, error) {
		return citation{}, status.Errorf(codes.FailedPrecondition, "citation refused: decision %q: %s", decisionID, why)
	}
	switch {
	case dSession != sessionID:
		return citation{}, status.Errorf(codes.PermissionDenied, "citation refused: decision %q was made for another session", decisionID)
	case effect != "allow":
		return refuse("it is a " + effect + ", not an allow")
	case dryRun:
		return refuse("it is a dry run")
	case dAction != action:
		return refuse(fmt.Sprintf("it authorized %q, not %q", dAction, action))
	}
	c := citation{id: decisionID, grant: grant, mode: mode}
	if grant == "" {
		switch {
		case cited:
			return refuse("it was already cited (single use)")
		case stale:
			return refuse(fmt.Sprintf("it is older than the citation window (%s)", window))
		}
		return c, nil
	}
	var (
		consumedBy      string
		payload, result []byte
		h               = &consumedHold{id: grant}
	)
	err = tx.QueryRow(ctx, `SELECT COALESCE(consumed_by, ''), payload, resource, applied_at IS NOT NULL, applied_result
		FROM holds WHERE id = $1 FOR UPDATE`, grant).Scan(&consumedBy, &payload, &h.resource, &h.applied, &result)
	if errors.Is(err, pgx.ErrNoRows) {
		return refuse(fmt.Sprintf("the hold %s it names no longer exists", grant))
	}
	if err != nil {
		return citation{}, fmt.Errorf("read approved hold %s: %w", grant, err)
	}
	if consumedBy != decisionID {
		return refuse(fmt.Sprintf("it did not consume hold %s; only the decision that consumed a hold applies its payload", grant))
	}
	if err := json.Unmarshal(payload, &h.payload); err != nil {
		return citation{}, fmt.Errorf("decode approved hold %s: %w", grant, err)
	}
	if h.applied && len(result) > 0 {
		if err := json.Unmarshal(result, &h.result); err != nil {
			return citation{}, fmt.Errorf("decode applied result of hold %s: %w", grant, err)
		}
	}
	c.hold = h
	return c, nil
}

// boundToDecision binds the applied payload to what was decided: a
// citation names session and action only, so without this a runner could
// cite an ALLOW and apply another payload. An ALLOW that consumed a grant
// applies exactly the approved hold's payload (a2a: plus the message id the
// runner stamps) and resource.
func boundToDecision(c citation, req *guardv1.ApplyActionRequest) error {
	if req.GetAction() == ActionA2ASend {
		if _, err := a2aTarget(req); err != nil {
			return err
		}
	}
	if c.hold == nil {
		return nil
	}
	approved := c.hold.payload
	b, err := req.GetPayload().MarshalJSON()
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "payload: %v", err)
	}
	got := map[string]any{}
	if err := json.Unmarshal(b, &got); err != nil {
		return status.Errorf(codes.InvalidArgument, "payload: %v", err)
	}
	if _, had := approved["id"]; req.GetAction() == ActionA2ASend && !had {
		delete(got, "id")
	}
	if approved == nil {
		approved = map[string]any{}
	}
	if !reflect.DeepEqual(approved, got) {
		return status.Errorf(codes.PermissionDenied, "payload differs from the one approved in hold %s", c.hold.id)
	}
	if len(c.hold.resource) > 0 && len(req.GetResource()) > 0 && !maps.Equal(c.hold.resource, req.GetResource()) {
		return status.Errorf(codes.PermissionDenied, "resource differs from the one approved in hold %s", c.hold.id)
	}
	return nil
}

// recheckTx re-runs the guard's baseline for what is about to be applied,
// in the applying transaction (D3 at apply): a deny refuses, and a hold is
// satisfied only by a citation that consumed an approval.
func (s *Service) recheckTx(ctx context.Context, tx pgx.Tx, sess appliedSession, c citation, req *guardv1.ApplyActionRequest) error {
	if s.baseline == nil {
		return status.Error(codes.Unavailable, "the guard is not wired (failing closed)")
	}
	resource := map[string]string{}
	for k, v := range req.GetResource() {
		resource[k] = v
	}
	if c.hold != nil && len(c.hold.resource) > 0 {
		resource = c.hold.resource
	}
	if req.GetAction() == ActionA2ASend {
		target, err := a2aTarget(req)
		if err != nil {
			return err
		}
		resource["to"] = target
	}
	in := guard.Input{
		Action:   req.GetAction(),
		Actor:    &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: sess.groupID, SessionId: sess.id}}},
		Resource: resource,
		Payload:  req.GetPayload().AsMap(),
	}
	d, err := s.baseline(ctx, tx, in)
	if err != nil {
		return fmt.Errorf("re-check the baseline: %w", err)
	}
	switch {
	case d.Effect == guard.EffectDeny && d.DecidedBy == guard.ByPrecheck:
		return status.Errorf(codes.InvalidArgument, "payload: %s", d.Reason)
	case d.Effect == guard.EffectDeny:
		return status.Errorf(codes.PermissionDenied, "not applied: the guard now denies it (%s); decision %q no longer holds", d.Reason, c.id)
	case d.Effect == guard.EffectHold && c.hold == nil:
		// A gate still in audit or warn mode answers ALLOW here (the
		// baseline reads the live mode of this target's policy and action);
		// a HOLD means it is enforced now, and the citation has no approval.
		return status.Errorf(codes.PermissionDenied, "not applied: it needs an approval (%s) and the cited decision %q carries none", d.Reason, c.id)
	}
	return nil
}

// markAppliedTx consumes the citation and, for a grant's consuming
// decision, records the hold as applied with its result.
func markAppliedTx(ctx context.Context, tx pgx.Tx, c citation, out applied) error {
	if _, err := tx.Exec(ctx, `UPDATE decisions SET cited_at = now() WHERE id = $1`, c.id); err != nil {
		return fmt.Errorf("cite decision: %w", err)
	}
	if c.hold == nil {
		return nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode applied result: %w", err)
	}
	if _, err := tx.Exec(ctx, `UPDATE holds SET applied_at = now(), applied_result = $2 WHERE id = $1 AND applied_at IS NULL`, c.hold.id, b); err != nil {
		return fmt.Errorf("mark hold %s applied: %w", c.hold.id, err)
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
	// The approval was for this name: a taken one is refused, not renamed.
	id, _, err := resources.CreateGroupTx(ctx, tx, resources.NewGroup{Name: name, Instructions: instructions}, resources.RefuseTakenName)
	if err != nil {
		return nil, "", err
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
		if !pkgname.Apt(p) {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.apt: invalid package name %q", p)
		}
	}
	for _, p := range addNpm {
		if !pkgname.Npm(p) {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.npm: invalid package name %q", p)
		}
	}
	c, err := resources.LockConfigTx(ctx, tx, sess.groupID)
	if err != nil {
		return nil, "", err
	}
	apt, npm := union(c.Apt, addApt), union(c.Npm, addNpm)
	var version int64
	err = tx.QueryRow(ctx, `UPDATE container_configs SET apt_packages = $2, npm_packages = $3, version = version + 1, updated_at = now()
		WHERE agent_group_id = $1 RETURNING version`, sess.groupID, apt, npm).Scan(&version)
	if err != nil {
		return nil, "", fmt.Errorf("update container config: %w", err)
	}
	added := append(prefixed("apt: ", addApt), prefixed("npm: ", addNpm)...)
	pushIDs, err := pushes.RestartGroupTx(ctx, tx, sess.groupID, "packages installed: "+strings.Join(added, ", "), true, version)
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
	env := map[string]string{}
	for k, v := range req.GetPayload().GetFields()["env"].GetStructValue().GetFields() {
		sv, ok := v.GetKind().(*structpb.Value_StringValue)
		if !ok {
			return nil, "", status.Errorf(codes.InvalidArgument, "payload.env.%s: must be a string", k)
		}
		env[k] = sv.StringValue
	}
	c, err := resources.LockConfigTx(ctx, tx, sess.groupID)
	if err != nil {
		return nil, "", err
	}
	mcp := c.MCP
	entry := resources.MCPServer{Name: name, Command: command, Args: args, Env: env}
	replaced := false
	for i, m := range mcp {
		if m.Name == name {
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
	pushIDs, err := pushes.RestartGroupTx(ctx, tx, sess.groupID, "MCP server added: "+name, true, version)
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
		messageID = store.NewID("msg_", 10)
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
