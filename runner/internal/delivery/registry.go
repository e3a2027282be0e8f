// Package delivery is the runner's delivery-action registry and the one path
// every action a container asks for takes: precheck → Guard decision →
// hold / deny / run the handler, with a notice back to the agent either way.
//
// Each action is registered with the catalog action it maps to; the
// RegisterRunner manifest is derived from the registry, so what the server
// checks for conformance is exactly what runs. Re-registering a guarded
// action without a mapping is an error: it would disarm the guard while the
// manifest still says the action is guarded (the seed's registerDeliveryAction).
package delivery

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Session is the agent an action comes from: the guard actor is
// agent{GroupID, ID}.
type Session struct {
	ID      string
	GroupID string
}

// Call is one authorized run of a handler.
type Call struct {
	Session  Session
	Payload  *structpb.Struct
	Resource map[string]string
	// DecisionID is the ALLOW decision that authorized the run; handlers cite
	// it in Registry.ApplyAction. Empty for unmapped (exempt) actions.
	DecisionID string
	// Replay is true when the call is an approved hold's replay.
	Replay bool
	// HoldID is the approved hold a replay runs (empty otherwise). What a
	// replay does outside the database takes its identity from it, so the
	// hold replayed again (its approval re-made after the database forgot
	// it) is recognised where its effect lands.
	HoldID string
	// Applied is the server's answer once it made the action's change
	// (ApplyAction: its result and message); nil when the server makes none
	// for this call (an exempt action, a fresh ApplyReplayOnly one).
	Applied *guardv1.ApplyActionResponse
}

// Outcome is what happened to one action, as the agent is told.
type Outcome struct {
	Status agentv1.SendStatus
	Reason string
	HoldID string
	// Approvers says who may approve a HELD action, in words (from the
	// decision's approver rule; "" when the runner was not told).
	Approvers string
	Result    *structpb.Struct
	// ResultJSON is a result that came as JSON (an MCP tool's
	// CallToolResult), kept so for a caller that takes it so (the gateway
	// makes it a Result for one that does not); Result is then unset.
	ResultJSON []byte
	// Undecided marks an outcome that is not final: the guard could not
	// decide (unreachable, or it failed closed for an infrastructure reason),
	// or it allowed but the server could not be reached to apply. Nothing was
	// applied; a replay is tried again with the same request id, which gets
	// the same answer, so the grant is used at most once.
	Undecided bool
	// NotHosted marks a refusal because this runner no longer hosts the
	// session (it was moved): not an answer about the action. The new host
	// gets the replay; this runner neither tells the agent nor reports the
	// push as applied.
	NotHosted bool
	// Told marks an outcome the agent already has — in the Send answer
	// itself (a tool call's result), or as the handler's own durable inbox
	// item (an approved tool call's result) — so no notice repeats it.
	Told bool
}

// ResultStruct is the outcome's result as a Struct (from ResultJSON when it
// came so; nil when it is not an object).
func (o Outcome) ResultStruct() *structpb.Struct {
	if o.Result != nil || len(o.ResultJSON) == 0 {
		return o.Result
	}
	st := &structpb.Struct{}
	if err := st.UnmarshalJSON(o.ResultJSON); err != nil {
		return nil
	}
	return st
}

// Done, Failed and Held build outcomes.
func Done(result *structpb.Struct, text string) Outcome {
	return Outcome{Status: agentv1.SendStatus_SEND_STATUS_DONE, Reason: text, Result: result}
}
func Failed(format string, args ...any) Outcome {
	return Outcome{Status: agentv1.SendStatus_SEND_STATUS_FAILED, Reason: fmt.Sprintf(format, args...)}
}
func Held(holdID, reason string) Outcome {
	return Outcome{Status: agentv1.SendStatus_SEND_STATUS_HELD, HoldID: holdID, Reason: reason}
}
func Denied(reason string) Outcome {
	return Outcome{Status: agentv1.SendStatus_SEND_STATUS_DENIED, Reason: reason}
}

// Action is one delivery action.
type Action struct {
	// Name is what containers send, e.g. "install_packages".
	Name string
	// CatalogAction is the guard catalog action consulted before Run;
	// "" = unmapped, which the server accepts only for its declared exemptions
	// (cli_request: its inner commands are guarded server-side).
	CatalogAction string
	// ApprovalKind is the hold kind a HOLD creates (the catalog entry's
	// approval action, e.g. "install_packages", "a2a_message_gate").
	ApprovalKind string
	// Description tells an agent (a model, through clawguard-mcp) what the
	// action does, in a sentence or two.
	Description string
	// Schema is the payload's JSON Schema: the one definition of a
	// well-formed payload. The engine validates every payload (fresh and
	// replayed) with it before any decision, so no hold is ever created for
	// a malformed request, and ListActions serves it. nil: any object.
	Schema *jsonschema.Schema
	// Precheck, when set, runs after the schema, for what depends on the
	// runner's state rather than the payload's shape; its error is told to
	// the agent, and nothing is decided.
	Precheck func(s Session, p *structpb.Struct) error
	// Resource gives the decision's resource map (e.g. {"to": group}).
	Resource func(s Session, p *structpb.Struct) map[string]string
	// Card gives the hold card's title and question.
	Card func(s Session, p *structpb.Struct) (title, question string)
	// Stamp gives the payload keys the runner adds to what the server
	// applies (a2a.send: the message id; mcp.call: its claim); nil: none.
	Stamp func(c Call) map[string]string
	// ApplyReplayOnly: the server's part is only an approved hold's replay
	// (mcp.call: the runner's claim on the hold); an allowed fresh run is
	// the runner's alone. Otherwise the engine has the server apply every
	// authorized run of a guarded action (ApplyAction) before Run.
	ApplyReplayOnly bool
	// Run performs the runner's part of the action once it is authorized
	// and the server applied its own (Call.Applied).
	Run func(ctx context.Context, c Call) Outcome
}

// Registry holds the delivery actions. Safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	actions map[string]registered
	log     *slog.Logger
}

type registered struct {
	Action
	schema compiled
}

// NewRegistry returns an empty registry.
func NewRegistry(log *slog.Logger) *Registry {
	if log == nil {
		log = slog.Default()
	}
	return &Registry{actions: map[string]registered{}, log: log}
}

// Register adds or replaces an action. Replacing a guarded action with an
// unmapped one is refused: it would disarm the guard.
func (r *Registry) Register(a Action) error {
	if a.Name == "" || a.Run == nil {
		return fmt.Errorf("delivery action %q: name and Run are required", a.Name)
	}
	if a.CatalogAction != "" && a.ApprovalKind == "" {
		return fmt.Errorf("delivery action %q: a guarded action needs its approval kind", a.Name)
	}
	schema, err := compile(a.Name, a.Schema)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.actions[a.Name]; ok {
		if old.CatalogAction != "" && a.CatalogAction == "" {
			return fmt.Errorf("delivery action %q is guarded (%s); re-registering it without a catalog mapping would disarm the guard",
				a.Name, old.CatalogAction)
		}
		r.log.Warn("delivery action handler replaced", "action", a.Name, "catalog_action", a.CatalogAction)
	}
	r.actions[a.Name] = registered{Action: a, schema: schema}
	return nil
}

// MustRegister is Register for start-up wiring, where an error is a bug.
func (r *Registry) MustRegister(a Action) {
	if err := r.Register(a); err != nil {
		panic(err)
	}
}

// Get looks an action up.
func (r *Registry) Get(name string) (Action, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.actions[name]
	return a.Action, ok
}

// Validate checks a payload against the action's schema (and its
// Precheck); the error is what the agent is told.
func (r *Registry) Validate(s Session, name string, p *structpb.Struct) error {
	r.mu.RLock()
	a, ok := r.actions[name]
	r.mu.RUnlock()
	if !ok {
		return fmt.Errorf("unknown action %q", name)
	}
	if err := a.schema.validate(name, p); err != nil {
		return err
	}
	if a.Precheck != nil {
		return a.Precheck(s, p)
	}
	return nil
}

// Specs describes every action with its payload schema, sorted by name
// (what the gateway's ListActions answers).
func (r *Registry) Specs() []*agentv1.ActionSpec {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*agentv1.ActionSpec, 0, len(r.actions))
	for _, n := range r.namesLocked() {
		a := r.actions[n]
		out = append(out, &agentv1.ActionSpec{Name: n, Description: a.Description,
			InputSchemaJson: a.schema.text, CatalogAction: a.CatalogAction})
	}
	return out
}

// Names lists the registered actions, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.actions))
	for n := range r.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Manifest is the RegisterRunner declaration of every action, sorted.
func (r *Registry) Manifest() []*guardv1.DeliveryActionDecl {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*guardv1.DeliveryActionDecl, 0, len(r.actions))
	for _, n := range r.namesLocked() {
		out = append(out, &guardv1.DeliveryActionDecl{Name: n, CatalogAction: r.actions[n].CatalogAction})
	}
	return out
}

func (r *Registry) namesLocked() []string {
	names := make([]string, 0, len(r.actions))
	for n := range r.actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
