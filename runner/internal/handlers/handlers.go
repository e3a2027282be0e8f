// Package handlers registers the runner's delivery actions: each with its
// catalog mapping, precheck, hold card, the keys it stamps and handler body.
// A body runs only after the guard's ALLOW and once the server applied the
// central mutation (delivery.Engine: Registry.ApplyAction citing the ALLOW,
// or naming an approved hold); it does the runner's own part — a container
// restart, the agent told — from the server's answer (Call.Applied).
package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/secret"
	"github.com/clawguard/clawguard/runner/internal/delivery"
	rt "github.com/clawguard/clawguard/runner/internal/runtime"
)

// Delivery action names, as containers send them.
const (
	CreateAgent     = "create_agent"
	InstallPackages = "install_packages"
	AddMCPServer    = "add_mcp_server"
	SendMessage     = "send_message"
	CLIRequest      = "cli_request"
	Reply           = "reply"
)

// Deps is what the handler bodies need.
type Deps struct {
	// Conn reaches the server with the runner's token.
	Conn grpc.ClientConnInterface
	// Restart restarts a session's container, rebuilding its group's image
	// first when rebuild is set (after a config change), and returns the
	// last lines of the build's output. A failed build leaves the running
	// container as it is.
	Restart func(ctx context.Context, s delivery.Session, rebuild bool) (string, error)
	// OnWake gives the session's fresh agent a message (the seed's on_wake):
	// after an approved self-modification restart, it asks the agent to
	// verify the change and report. id is stable for one applied action.
	OnWake func(s delivery.Session, id, text string)
	// Done remembers, in the data dir, what a replayed hold did outside the
	// database (its container restart), so the hold replayed again — its
	// approval re-made after the database forgot it — does not do it twice.
	// Nil: nothing is remembered.
	Done Done
	// Destination resolves what a session's agent calls another group (a
	// destination's local name, or the group's id) to the group's id; nil:
	// ids only.
	Destination func(ctx context.Context, s delivery.Session, to string) (string, error)
	Log         *slog.Logger
}

// Done is a durable record of ids (connect.Applied).
type Done interface {
	Seen(id string) bool
	Mark(id string) error
}

// Register adds every action to reg.
func Register(reg *delivery.Registry, d Deps) error {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	h := &handlers{d: d, reg: guardv1.NewRegistryClient(d.Conn)}
	for _, a := range []delivery.Action{
		{
			Name: CreateAgent, CatalogAction: "agents.create", ApprovalKind: "create_agent",
			Description: "Create a new agent (its own agent group) with instructions; you can message it afterwards. Usually held for an admin's approval.",
			Schema:      delivery.CreateAgentSchema(),
			Card:        createAgentCard,
			Run:         h.createAgent,
		},
		{
			Name: InstallPackages, CatalogAction: "self_mod.install_packages", ApprovalKind: "install_packages",
			Description: "Install apt or npm packages into your container: once approved, your image is rebuilt and your container restarted with them. Usually held for an admin's approval.",
			Schema:      delivery.InstallPackagesSchema(),
			Card:        installPackagesCard,
			Run:         h.installPackages,
		},
		{
			Name: AddMCPServer, CatalogAction: "self_mod.add_mcp_server", ApprovalKind: "add_mcp_server",
			Description: "Ask for an MCP server to be added to your container's configuration (its command, arguments and environment); once approved, your container restarts with it. Usually held for an admin's approval.",
			Schema:      delivery.AddMCPServerSchema(),
			Card:        addMCPServerCard,
			Run:         h.addMCPServer,
		},
		{
			Name: SendMessage, CatalogAction: "a2a.send", ApprovalKind: "a2a_message_gate",
			Description: "Send a message to another agent group: \"to\" is one of your destinations' names (or the group's id). The guard may allow it, hold it for approval or deny it by the groups' message policy.",
			Schema:      delivery.SendMessageSchema(),
			Normalize:   h.destination,
			Resource: func(s delivery.Session, p *structpb.Struct) map[string]string {
				return map[string]string{"from": s.GroupID, "to": delivery.String(p, "to")}
			},
			Card:  sendMessageCard,
			Stamp: stampMessageID,
			Run:   h.sendMessage,
		},
		{
			// Unmapped on purpose: the server's declared exemption. Every inner
			// command is an admin RPC the server guards at dispatch.
			Name:        CLIRequest,
			Description: "Run an admin command (an ncl command: a Registry or Approvals RPC, e.g. ListGroups) as this agent. The server guards each command; some are held for approval.",
			Schema:      cliRequestSchema(),
			Run:         h.cliRequest,
		},
		{
			// Unmapped on purpose: the server's declared exemption. The agent
			// speaks only into its own session's chat; the server picks the
			// chat from the session, never from the payload.
			Name:        Reply,
			Description: "Post a message into this session's chat (the people who talk to you there read it).",
			Schema:      replySchema(),
			Run:         h.reply,
		},
	} {
		if err := reg.Register(a); err != nil {
			return err
		}
	}
	return nil
}

type handlers struct {
	d   Deps
	reg guardv1.RegistryClient
}

func (h *handlers) createAgent(_ context.Context, c delivery.Call) delivery.Outcome {
	res := c.Applied
	return delivery.Done(res.GetResult(), orText(res.GetMessage(), fmt.Sprintf("created agent %q", delivery.String(c.Payload, "name"))))
}

func (h *handlers) installPackages(ctx context.Context, c delivery.Call) delivery.Outcome {
	res := c.Applied
	pkgs := packageList(c.Payload)
	if h.restartedFor(c) {
		return delivery.Done(res.GetResult(), fmt.Sprintf("installed %s; the container was already rebuilt and restarted for this approval", pkgs))
	}
	build, err := h.d.Restart(ctx, c.Session, true)
	if err != nil {
		h.d.Log.Error("rebuild after install_packages failed", "session", c.Session.ID, "err", err, "build_output", build)
		out := delivery.Failed("packages added to config (%s) but the image rebuild failed; the running container was kept. "+
			"An admin must retry the install_packages request or inspect the build: %v%s", pkgs, err, buildTail(build))
		h.announce(ctx, c, "install_packages "+out.Reason)
		return out
	}
	h.d.Log.Info("install_packages applied", "session", c.Session.ID, "packages", pkgs, "build_output", build)
	h.restarted(c)
	text := fmt.Sprintf("installed %s; image rebuilt and container restarted%s", pkgs, buildTail(build))
	if strings.Contains(build, rt.NotInstalled) {
		// Words that are true: the approval is in the config, the packages
		// are not in the image (no package manager to install them with).
		text = fmt.Sprintf("approved %s, recorded but not installed (the agent's base image has no package manager); container restarted%s",
			pkgs, buildTail(build))
		h.onWake(c, fmt.Sprintf("Your container was restarted after an admin approved packages (%s), but they were recorded, "+
			"not installed: your base image has no package manager. Tell the user they are not available.", pkgs))
	} else {
		h.onWake(c, fmt.Sprintf("Your container was restarted on a rebuilt image with the packages an admin approved (%s). "+
			"Verify they are installed and work (for example, run each one's --version), then report the result to the user.", pkgs))
	}
	h.announce(ctx, c, "install_packages: "+text)
	return delivery.Done(res.GetResult(), text)
}

// announce posts an approved self-modification's outcome (with its build
// output) as a notice to the session's chat, where the people who asked for
// and approved it talk to the agent. Best effort: a session without a chat
// has none to post to.
func (h *handlers) announce(ctx context.Context, c delivery.Call, text string) {
	if r := []rune(text); len(r) > maxChatNotice {
		text = "…" + string(r[len(r)-maxChatNotice+1:])
	}
	ctx = metadata.AppendToOutgoingContext(ctx, SessionHeader, c.Session.ID)
	_, err := h.reg.PostChatMessage(ctx, &guardv1.PostChatMessageRequest{
		SessionId: c.Session.ID, Kind: guardv1.ChatMessageKind_CHAT_MESSAGE_KIND_NOTICE, Text: text,
	})
	switch {
	case err == nil:
	case status.Code(err) == codes.FailedPrecondition:
		h.d.Log.Debug("no chat to announce to", "session", c.Session.ID)
	default:
		h.d.Log.Warn("announce to the session's chat", "session", c.Session.ID, "err", err)
	}
}

// maxChatNotice is the server's bound on a chat message (characters).
const maxChatNotice = 4096

// buildTail is the build output shown with an outcome ("" when nothing was built).
func buildTail(build string) string {
	if build == "" {
		return ""
	}
	return "\n\nBuild output (last lines; all of it in the workspace's .clawguard/build.log):\n" + build
}

// onWake is the verify-and-report message for the restarted agent, sent
// only once the restart succeeded (a failed one is reported as a failure).
// A replay's is named by its hold, so the agent hears it once per approval.
func (h *handlers) onWake(c delivery.Call, text string) {
	if h.d.OnWake != nil {
		h.d.OnWake(c.Session, "on_wake-"+effectID(c), text)
	}
}

// effectID names what one authorized run does outside the database: a
// replay's hold (the same however often the hold is replayed, whatever the
// database forgot), else the ALLOW that authorized it (the same for a
// retried send: its decision is idempotent by request id).
func effectID(c delivery.Call) string {
	if c.HoldID != "" {
		return c.HoldID
	}
	return c.DecisionID
}

// restartedFor reports whether this runner already restarted the session's
// container for this replay's hold: its approval re-made after the
// database forgot it, the database's half is applied again (above) and the
// restart, the on_wake message and the chat announcement are not repeated.
func (h *handlers) restartedFor(c delivery.Call) bool {
	return c.HoldID != "" && h.d.Done != nil && h.d.Done.Seen("restart/"+c.HoldID)
}

func (h *handlers) restarted(c delivery.Call) {
	if c.HoldID == "" || h.d.Done == nil {
		return
	}
	if err := h.d.Done.Mark("restart/" + c.HoldID); err != nil {
		h.d.Log.Warn("restart for an approval not recorded; replayed again, it would restart again", "hold", c.HoldID, "err", err)
	}
}

func (h *handlers) addMCPServer(ctx context.Context, c delivery.Call) delivery.Outcome {
	res := c.Applied
	name := delivery.String(c.Payload, "name")
	if h.restartedFor(c) {
		return delivery.Done(res.GetResult(), fmt.Sprintf("MCP server %q added; the container was already restarted for this approval", name))
	}
	if build, err := h.d.Restart(ctx, c.Session, true); err != nil {
		return delivery.Failed("MCP server %q added to config but the restart failed; the running container was kept: %v%s", name, err, buildTail(build))
	}
	h.restarted(c)
	h.onWake(c, fmt.Sprintf("The MCP server %q an admin approved (command: %s) is hosted by the runner, outside your container. "+
		"Verify its tools answer (list your guarded MCP tools again), then report the result to the user.", name, clip(strings.TrimSpace(delivery.String(c.Payload, "command")), 200)))
	return delivery.Done(res.GetResult(), fmt.Sprintf("MCP server %q added; container restarted", name))
}

func (h *handlers) sendMessage(_ context.Context, c delivery.Call) delivery.Outcome {
	res := c.Applied
	return delivery.Done(res.GetResult(), orText(res.GetMessage(), "message sent to "+delivery.String(c.Payload, "to")))
}

// stampMessageID is the message id, stable for this authorized send: for a
// replay, its hold's, so the hold replayed again (its approval re-made after
// the database forgot it) delivers the same message, which the target's
// inbox recognises by sender and id. An id the agent set is kept.
func stampMessageID(c delivery.Call) map[string]string {
	if delivery.String(c.Payload, "id") != "" {
		return nil
	}
	return map[string]string{"id": MessageID(c)}
}

// MessageID is the id the runner stamps on an agent's message: m_<hold>
// for an approved hold's replay, else m_<ALLOW decision>.
func MessageID(c delivery.Call) string { return "m_" + effectID(c) }

func createAgentCard(s delivery.Session, p *structpb.Struct) (string, string) {
	q := fmt.Sprintf("Agent group %s wants to create a new agent named %q.", s.GroupID, delivery.String(p, "name"))
	if ins := delivery.String(p, "instructions"); ins != "" {
		q += "\n\nInstructions:\n" + clip(ins, 1500)
	}
	return "Create agent", q
}

func installPackagesCard(s delivery.Session, p *structpb.Struct) (string, string) {
	q := fmt.Sprintf("Agent group %s wants to install packages: %s.", s.GroupID, packageList(p))
	if r := delivery.String(p, "reason"); r != "" {
		q += "\n\nReason: " + clip(r, 500)
	}
	return "Install packages", q
}

func addMCPServerCard(s delivery.Session, p *structpb.Struct) (string, string) {
	args, _ := delivery.StringList(p, "args")
	cmd := strings.TrimSpace(delivery.String(p, "command") + " " + strings.Join(args, " "))
	q := fmt.Sprintf("Agent group %s wants to add MCP server %q: %s", s.GroupID, delivery.String(p, "name"), clip(cmd, 500))
	if img := delivery.String(p, "image"); img != "" {
		q += "\n\nImage: " + clip(img, 300)
	}
	q += "\n\nThe runner hosts it outside the agent's container; each of its tool calls is then decided by its tool settings (hold until set)."
	// The env is applied with the server (NODE_OPTIONS, PATH, proxies…):
	// the approver must see which variables it sets. Their values are
	// secrets, shown to nobody (the hold's payload is redacted too).
	if env := p.GetFields()["env"].GetStructValue().GetFields(); len(env) > 0 {
		keys := make([]string, 0, len(env))
		for k := range env {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		vars := make([]string, 0, len(keys))
		for _, k := range keys {
			vars = append(vars, k+"="+secret.Redacted)
		}
		q += "\n\nEnvironment (values are write-only): " + clip(strings.Join(vars, " "), 1000)
	}
	return "Add MCP server", q
}

func sendMessageCard(s delivery.Session, p *structpb.Struct) (string, string) {
	q := fmt.Sprintf("Agent group %s wants to send a message to %s:\n\n%s",
		s.GroupID, delivery.String(p, "to"), clip(delivery.String(p, "text"), 1500))
	// Everything else in the payload reaches the recipient too (the server
	// delivers "content" as the text when "text" is empty, and the whole
	// payload as data): show it, or the approver approves what they never saw.
	if extra := otherFields(p, "to", "text"); extra != "" {
		q += "\n\nAlso delivered with the message:\n" + clip(extra, 1500)
	}
	return "Message approval", q
}

// otherFields is the payload without the named keys, as JSON ("" when
// nothing else is there).
func otherFields(p *structpb.Struct, skip ...string) string {
	rest := map[string]any{}
	for k, v := range p.GetFields() {
		if !slices.Contains(skip, k) {
			rest[k] = v.AsInterface()
		}
	}
	if len(rest) == 0 {
		return ""
	}
	b, err := json.Marshal(rest) // sorted keys: the same payload, the same card
	if err != nil {
		return fmt.Sprintf("(%d more fields that could not be shown)", len(rest))
	}
	return string(b)
}

func packageList(p *structpb.Struct) string {
	apt, _ := delivery.StringList(p, "apt")
	npm, _ := delivery.StringList(p, "npm")
	var parts []string
	for _, a := range apt {
		parts = append(parts, "apt: "+a)
	}
	for _, n := range npm {
		parts = append(parts, "npm: "+n)
	}
	return strings.Join(parts, ", ")
}

// clip bounds what one field shows on a card; the cut says how much is
// not shown, so an approver knows there is more than the card carries.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + fmt.Sprintf("… [%d more bytes not shown: read the hold's payload before approving]", len(s)-n)
	}
	return s
}

func orText(s, def string) string {
	if s != "" {
		return s
	}
	return def
}
