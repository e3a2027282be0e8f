package ncl

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/clawguard/clawguard/proto/enumword"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// Config as code: the administered state as one YAML document a person
// reviews in a pull request (names, not ids; stable order; nothing the
// server generates), read from the server by `ncl export` and made true by
// `ncl apply`, one existing admin RPC per change.

// stateVersion is the document's apiVersion.
const stateVersion = "clawguard/v1"

// state is the document.
type state struct {
	APIVersion   string            `yaml:"apiVersion"`
	Users        []userSpec        `yaml:"users,omitempty"`
	Groups       []groupSpec       `yaml:"groups,omitempty"`
	Destinations []destinationSpec `yaml:"destinations,omitempty"`
	Policies     []policySpec      `yaml:"policies,omitempty"`
	Roles        []roleSpec        `yaml:"roles,omitempty"`
	Catalog      []actionSpec      `yaml:"catalog,omitempty"`
	// Chats (messaging groups), which groups they reach, and group members.
	MessagingGroups []messagingGroupSpec `yaml:"messagingGroups,omitempty"`
	Wirings         []wiringSpec         `yaml:"wirings,omitempty"`
	Members         []memberSpec         `yaml:"members,omitempty"`
	// The model gateway's providers and prices (statemodels.go).
	ModelProviders []modelProviderSpec `yaml:"modelProviders,omitempty"`
	ModelPrices    []modelPriceSpec    `yaml:"modelPrices,omitempty"`
}

type userSpec struct {
	ID   string `yaml:"id"`
	Name string `yaml:"name,omitempty"`
	// Console sign-ins bound to the user (stateoidc.go).
	OIDC []oidcSpec `yaml:"oidc,omitempty"`
}

type groupSpec struct {
	Name       string `yaml:"name"`
	CLIScope   string `yaml:"cliScope"`
	BaseImage  string `yaml:"baseImage,omitempty"`
	PinnedHost string `yaml:"pinnedHost,omitempty"`
	// Packages installed into the group's image, by manager.
	AptPackages []string `yaml:"aptPackages,omitempty"`
	NpmPackages []string `yaml:"npmPackages,omitempty"`
	// MCP servers the group's agents run. Env values are write-only: export
	// writes each as "<redacted>", a reference that apply reads as "keep the
	// value the server holds"; a value written out is set.
	MCPServers []mcpServerSpec `yaml:"mcpServers,omitempty"`
	// The agent: its command (after clawguard-init), its non-secret
	// environment, its instructions, and its way out (stateagent.go).
	AgentCommand []string          `yaml:"agentCommand,omitempty"`
	AgentEnv     map[string]string `yaml:"agentEnv,omitempty"`
	Instructions string            `yaml:"instructions,omitempty"`
	Egress       *egressSpec       `yaml:"egress,omitempty"`
	// Its model providers, rules, default and budget (statemodels.go).
	Models *groupModelsSpec `yaml:"models,omitempty"`
}

type mcpServerSpec struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command,omitempty"`
	Args    []string          `yaml:"args,omitempty"`
	Env     map[string]string `yaml:"env,omitempty"`
	Image   string            `yaml:"image,omitempty"`
	// Its tools' settings (statemcp.go): the default of the tools nobody
	// set, and each tool's own.
	Default *mcpSettingSpec `yaml:"default,omitempty"`
	Tools   []mcpToolSpec   `yaml:"tools,omitempty"`
}

func (m mcpServerSpec) equal(o mcpServerSpec) bool {
	return m.Name == o.Name && m.Command == o.Command && slices.Equal(m.Args, o.Args) && maps.Equal(m.Env, o.Env) && m.Image == o.Image
}

// A destination of a group: what its agents call another group (target)
// or a chat (chat, a messaging group's key: channelType/platformId).
type destinationSpec struct {
	Group  string `yaml:"group"`
	Name   string `yaml:"name"`
	Target string `yaml:"target,omitempty"`
	Chat   string `yaml:"chat,omitempty"`
}

// A chat the bridges route, named by its channel and platform id (the
// server's id is not in the document).
type messagingGroupSpec struct {
	ChannelType         string `yaml:"channelType"`
	PlatformID          string `yaml:"platformId"`
	Name                string `yaml:"name,omitempty"`
	UnknownSenderPolicy string `yaml:"unknownSenderPolicy,omitempty"`
	GroupChat           bool   `yaml:"groupChat,omitempty"`
	// Denied: a registration of this chat was rejected. Only the server
	// sets it; the document carries it so a round trip changes nothing.
	Denied bool `yaml:"denied,omitempty"`
}

// A chat wired to an agent group: the chat's messages reach the group.
type wiringSpec struct {
	Chat  string `yaml:"chat"`
	Group string `yaml:"group"`
	id    string // the server's id, for deletion (read, never written)
}

// A user who is a member of a group.
type memberSpec struct {
	Group string `yaml:"group"`
	User  string `yaml:"user"`
}

type policySpec struct {
	From      string   `yaml:"from"`
	To        string   `yaml:"to"`
	Approvers []string `yaml:"approvers"`
	Approvals int32    `yaml:"approvals,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
	// Escalation (user ids, group:<name>).
	EscalationSpec `yaml:",inline"`
}

// EscalationSpec is an escalation plan as the state file holds it.
type EscalationSpec struct {
	RemindAfter   string   `yaml:"remindAfter,omitempty"`
	EscalateAfter string   `yaml:"escalateAfter,omitempty"`
	EscalateTo    []string `yaml:"escalateTo,omitempty"`
}

// escalationOf is a plan read from the server: durations as Go writes
// them, groups by name.
func escalationOf(remind, escalate *durationpb.Duration, to []string, book groupBook) EscalationSpec {
	var e EscalationSpec
	if remind != nil {
		e.RemindAfter = remind.AsDuration().String()
	}
	if escalate != nil {
		e.EscalateAfter = escalate.AsDuration().String()
	}
	for _, t := range to {
		if g, ok := strings.CutPrefix(t, "group:"); ok {
			t = "group:" + book.nameOf(g)
		}
		e.EscalateTo = append(e.EscalateTo, t)
	}
	return e
}

// request is the plan as the API takes it.
func (e EscalationSpec) request() (remind, escalate *durationpb.Duration, to []string, err error) {
	parse := func(field, v string) (*durationpb.Duration, error) {
		if v == "" {
			return nil, nil
		}
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", field, v, err)
		}
		return durationpb.New(d), nil
	}
	if remind, err = parse("remindAfter", e.RemindAfter); err == nil {
		escalate, err = parse("escalateAfter", e.EscalateAfter)
	}
	return remind, escalate, e.EscalateTo, err
}

func (e EscalationSpec) equal(o EscalationSpec) bool {
	return e.RemindAfter == o.RemindAfter && e.EscalateAfter == o.EscalateAfter && slices.Equal(e.EscalateTo, o.EscalateTo)
}

func (e EscalationSpec) words() string {
	w := ""
	if e.RemindAfter != "" {
		w += ", remind after " + e.RemindAfter
	}
	if e.EscalateAfter != "" {
		w += ", escalate after " + e.EscalateAfter + " to " + strings.Join(e.EscalateTo, ", ")
	}
	return w
}

type roleSpec struct {
	User  string `yaml:"user"`
	Role  string `yaml:"role"`
	Scope string `yaml:"scope"`
	Group string `yaml:"group,omitempty"`
}

// An operator setting of a catalog action (actions at their defaults are
// not listed).
type actionSpec struct {
	Action    string `yaml:"action"`
	Approvals int32  `yaml:"approvals,omitempty"`
	Mode      string `yaml:"mode,omitempty"`
	StepUp    bool   `yaml:"stepUp,omitempty"`
	// Escalation (user ids, group:<name>).
	EscalationSpec `yaml:",inline"`
}

func (d destinationSpec) key() string { return d.Group + "/" + d.Name }
func (p policySpec) key() string      { return p.From + " → " + p.To }
func (m messagingGroupSpec) key() string {
	return m.ChannelType + "/" + m.PlatformID
}
func (w wiringSpec) key() string { return w.Chat + " → " + w.Group }
func (m memberSpec) key() string { return m.User + " in " + m.Group }
func (d destinationSpec) to() string {
	if d.Chat != "" {
		return "chat " + d.Chat
	}
	return d.Target
}
func (r roleSpec) key() string {
	if r.Scope == "group" {
		return r.User + " " + r.Role + " of " + r.Group
	}
	return r.User + " " + r.Role + " (" + r.Scope + ")"
}

// parseState reads a document, refusing unknown fields (a typo must not
// silently mean "unset") with the line it is on.
func parseState(r io.Reader) (*state, error) {
	dec := yaml.NewDecoder(r)
	dec.KnownFields(true)
	var s state
	if err := dec.Decode(&s); err != nil {
		if err == io.EOF {
			return nil, fmt.Errorf("the document is empty")
		}
		return nil, err
	}
	if s.APIVersion != stateVersion {
		return nil, fmt.Errorf("apiVersion %q: want %s", s.APIVersion, stateVersion)
	}
	return &s, s.check()
}

// check refuses a document that names one thing twice or misses a key.
func (s *state) check() error {
	seen := map[string]bool{}
	once := func(kind, key string) error {
		if strings.TrimSpace(key) == "" || strings.HasSuffix(key, "/") || strings.HasPrefix(key, "/") {
			return fmt.Errorf("%s: a required name is empty", kind)
		}
		if seen[kind+" "+key] {
			return fmt.Errorf("%s %s is listed twice", kind, key)
		}
		seen[kind+" "+key] = true
		return nil
	}
	var err error
	for _, u := range s.Users {
		err = firstErr(err, once("user", u.ID))
	}
	for _, g := range s.Groups {
		err = firstErr(err, once("group", g.Name))
		for _, m := range g.MCPServers {
			err = firstErr(err, m.checkTools(g.Name))
		}
	}
	for _, d := range s.Destinations {
		err = firstErr(err, once("destination", d.key()))
	}
	for _, p := range s.Policies {
		err = firstErr(err, once("policy", p.From+"/"+p.To))
	}
	for _, r := range s.Roles {
		err = firstErr(err, once("role", r.key()))
	}
	for _, a := range s.Catalog {
		err = firstErr(err, once("catalog action", a.Action))
	}
	for _, m := range s.MessagingGroups {
		if m.ChannelType == "" || m.PlatformID == "" {
			err = firstErr(err, fmt.Errorf("messaging group %q: channelType and platformId are required", m.key()))
		}
		err = firstErr(err, once("messaging group", m.key()))
	}
	for _, w := range s.Wirings {
		if w.Chat == "" || w.Group == "" {
			err = firstErr(err, fmt.Errorf("wiring %q: chat and group are required", w.key()))
		}
		err = firstErr(err, once("wiring", w.Chat+"/"+w.Group))
	}
	for _, m := range s.Members {
		err = firstErr(err, once("member", m.Group+"/"+m.User))
	}
	for _, d := range s.Destinations {
		if (d.Target == "") == (d.Chat == "") {
			err = firstErr(err, fmt.Errorf("destination %s: exactly one of target and chat", d.key()))
		}
	}
	return firstErr(err, s.checkModels())
}

func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (s *state) yaml() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return buf.Bytes(), enc.Close()
}

// groupBook maps group ids and names both ways, and chats' ids and keys.
type groupBook struct {
	name map[string]string // id → name
	id   map[string]string // name → id
	chat map[string]string // chat key → id
	key  map[string]string // chat id → key
}

func newBook() groupBook {
	return groupBook{name: map[string]string{}, id: map[string]string{}, chat: map[string]string{}, key: map[string]string{}}
}

// chatID is a chat's id by its key, or the key as it is (the server says
// it is no messaging group).
func (b groupBook) chatID(key string) string {
	if id, ok := b.chat[key]; ok {
		return id
	}
	return key
}

func (b groupBook) chatKey(id string) string {
	if k, ok := b.key[id]; ok {
		return k
	}
	return id
}

func (b groupBook) nameOf(id string) string {
	if n, ok := b.name[id]; ok {
		return n
	}
	return id
}

// readState reads what the server holds now, as a document.
func readState(ctx context.Context, c *clients) (*state, groupBook, error) {
	s := &state{APIVersion: stateVersion}
	book := newBook()
	list := func(page func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error)) ([]proto.Message, error) {
		return pages(ctx, c, 0, page)
	}
	users, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListUsers(ctx, &guardv1.ListUsersRequest{Limit: size, PageToken: token})
		return msgs(r.GetUsers()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read users: %w", err)
	}
	for _, m := range users {
		u := m.(*guardv1.User)
		s.Users = append(s.Users, userSpec{ID: u.GetId(), Name: u.GetDisplayName()})
	}
	if err := readOIDC(ctx, c, s.Users); err != nil {
		return nil, book, err
	}
	groups, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListGroups(ctx, &guardv1.ListGroupsRequest{Limit: size, PageToken: token})
		return msgs(r.GetGroups()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read groups: %w", err)
	}
	for _, m := range groups {
		g := m.(*guardv1.Group)
		if other, dup := book.id[g.GetName()]; dup {
			return nil, book, fmt.Errorf("groups %s and %s are both called %q: a document names groups by name, rename one first", other, g.GetId(), g.GetName())
		}
		book.name[g.GetId()], book.id[g.GetName()] = g.GetName(), g.GetId()
		s.Groups = append(s.Groups, groupSpec{Name: g.GetName(), CLIScope: enumword.String(g.GetConfig().GetCliScope()),
			BaseImage: g.GetBaseImage(), PinnedHost: g.GetPinnedHost(),
			AptPackages: slices.Clone(g.GetConfig().GetAptPackages()), NpmPackages: slices.Clone(g.GetConfig().GetNpmPackages()),
			MCPServers: mcpSpecs(g.GetConfig().GetMcpServers())})
		if err := readMCPSettings(ctx, c, g.GetId(), &s.Groups[len(s.Groups)-1]); err != nil {
			return nil, book, err
		}
		if err := readGroupAgent(ctx, c, g, &s.Groups[len(s.Groups)-1]); err != nil {
			return nil, book, err
		}
	}
	chats, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListMessagingGroups(ctx, &guardv1.ListMessagingGroupsRequest{Limit: size, PageToken: token})
		return msgs(r.GetMessagingGroups()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read messaging groups: %w", err)
	}
	for _, m := range chats {
		mg := m.(*guardv1.MessagingGroup)
		spec := messagingGroupSpec{ChannelType: mg.GetChannelType(), PlatformID: mg.GetPlatformId(), Name: mg.GetName(),
			UnknownSenderPolicy: enumword.String(mg.GetUnknownSenderPolicy()), GroupChat: mg.GetIsGroup(), Denied: mg.GetDenied()}
		if other, dup := book.chat[spec.key()]; dup {
			return nil, book, fmt.Errorf("messaging groups %s and %s are both %s", other, mg.GetId(), spec.key())
		}
		book.chat[spec.key()], book.key[mg.GetId()] = mg.GetId(), spec.key()
		s.MessagingGroups = append(s.MessagingGroups, spec)
	}
	wirings, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListWirings(ctx, &guardv1.ListWiringsRequest{Limit: size, PageToken: token})
		return msgs(r.GetWirings()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read wirings: %w", err)
	}
	for _, m := range wirings {
		w := m.(*guardv1.Wiring)
		s.Wirings = append(s.Wirings, wiringSpec{Chat: book.chatKey(w.GetMessagingGroup()), Group: book.nameOf(w.GetGroup()), id: w.GetId()})
	}
	for _, g := range s.Groups { // members and destinations are listed per group
		members, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			r, err := c.reg.ListMembers(ctx, &guardv1.ListMembersRequest{Group: book.id[g.Name], Limit: size, PageToken: token})
			return msgs(r.GetMembers()), r.GetNextPageToken(), err
		})
		if err != nil {
			return nil, book, fmt.Errorf("read members of %s: %w", g.Name, err)
		}
		for _, m := range members {
			s.Members = append(s.Members, memberSpec{Group: g.Name, User: m.(*guardv1.Member).GetUserId()})
		}

		dests, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
			r, err := c.reg.ListDestinations(ctx, &guardv1.ListDestinationsRequest{Group: book.id[g.Name], Limit: size, PageToken: token})
			return msgs(r.GetDestinations()), r.GetNextPageToken(), err
		})
		if err != nil {
			return nil, book, fmt.Errorf("read destinations of %s: %w", g.Name, err)
		}
		for _, m := range dests {
			d := m.(*guardv1.Destination)
			spec := destinationSpec{Group: g.Name, Name: d.GetName()}
			if d.GetTargetGroup() != "" {
				spec.Target = book.nameOf(d.GetTargetGroup())
			} else {
				spec.Chat = book.chatKey(d.GetTargetMessagingGroup())
			}
			s.Destinations = append(s.Destinations, spec)
		}
	}
	policies, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListPolicies(ctx, &guardv1.ListPoliciesRequest{Limit: size, PageToken: token})
		return msgs(r.GetPolicies()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read policies: %w", err)
	}
	for _, m := range policies {
		p := m.(*guardv1.MessagePolicy)
		// "" inherits a2a.send's mode; "enforce" says so whatever that is.
		mode := enumword.String(p.GetMode())
		s.Policies = append(s.Policies, policySpec{From: book.nameOf(p.GetFromGroup()), To: book.nameOf(p.GetToGroup()),
			Approvers: append([]string{p.GetApproverUserId()}, p.GetAlsoApproverUserIds()...), Approvals: p.GetApprovals(), Mode: mode,
			EscalationSpec: escalationOf(p.GetRemindAfter(), p.GetEscalateAfter(), p.GetEscalateTo(), book)})
	}
	roles, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListRoles(ctx, &guardv1.ListRolesRequest{Limit: size, PageToken: token})
		return msgs(r.GetRoles()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read roles: %w", err)
	}
	for _, m := range roles {
		r := m.(*guardv1.RoleGrant)
		spec := roleSpec{User: r.GetUserId(), Role: enumword.String(r.GetRole()), Scope: enumword.String(r.GetScope())}
		if r.GetGroup() != "" {
			spec.Group = book.nameOf(r.GetGroup())
		}
		s.Roles = append(s.Roles, spec)
	}
	catalog, err := list(func(ctx context.Context, c *clients, size int32, token string) ([]proto.Message, string, error) {
		r, err := c.reg.ListCatalog(ctx, &guardv1.ListCatalogRequest{Limit: size, PageToken: token})
		return msgs(r.GetEntries()), r.GetNextPageToken(), err
	})
	if err != nil {
		return nil, book, fmt.Errorf("read catalog: %w", err)
	}
	for _, m := range catalog {
		e := m.(*guardv1.CatalogEntry)
		mode := enumword.String(e.GetMode())
		if mode == "enforce" {
			mode = ""
		}
		esc := escalationOf(e.GetRemindAfter(), e.GetEscalateAfter(), e.GetEscalateTo(), book)
		if e.GetApprovals() != 0 || mode != "" || e.GetStepUp() || !esc.equal(EscalationSpec{}) {
			s.Catalog = append(s.Catalog, actionSpec{Action: e.GetAction(), Approvals: e.GetApprovals(), Mode: mode, StepUp: e.GetStepUp(), EscalationSpec: esc})
		}
	}
	if err := readModels(ctx, c, s, book); err != nil {
		return nil, book, err
	}
	s.sort()
	return s, book, nil
}

func mcpSpecs(in []*guardv1.McpServer) []mcpServerSpec {
	var out []mcpServerSpec
	for _, m := range in {
		spec := mcpServerSpec{Name: m.GetName(), Command: m.GetCommand(), Args: slices.Clone(m.GetArgs()), Image: m.GetImage()}
		if len(m.GetEnv()) > 0 {
			spec.Env = maps.Clone(m.GetEnv())
		}
		out = append(out, spec)
	}
	return out
}

func msgs[T proto.Message](in []T) []proto.Message {
	out := make([]proto.Message, len(in))
	for i, m := range in {
		out[i] = m
	}
	return out
}

// sort puts every list in a stable order, so an export diffs cleanly.
func (s *state) sort() {
	slices.SortFunc(s.Users, func(a, b userSpec) int { return strings.Compare(a.ID, b.ID) })
	slices.SortFunc(s.Groups, func(a, b groupSpec) int { return strings.Compare(a.Name, b.Name) })
	for _, g := range s.Groups {
		slices.Sort(g.AptPackages)
		slices.Sort(g.NpmPackages)
		slices.SortFunc(g.MCPServers, func(a, b mcpServerSpec) int { return strings.Compare(a.Name, b.Name) })
	}
	slices.SortFunc(s.Destinations, func(a, b destinationSpec) int { return strings.Compare(a.key(), b.key()) })
	slices.SortFunc(s.Policies, func(a, b policySpec) int { return strings.Compare(a.key(), b.key()) })
	slices.SortFunc(s.Roles, func(a, b roleSpec) int { return strings.Compare(a.key(), b.key()) })
	slices.SortFunc(s.Catalog, func(a, b actionSpec) int { return strings.Compare(a.Action, b.Action) })
	slices.SortFunc(s.MessagingGroups, func(a, b messagingGroupSpec) int { return strings.Compare(a.key(), b.key()) })
	slices.SortFunc(s.Wirings, func(a, b wiringSpec) int { return strings.Compare(a.key(), b.key()) })
	slices.SortFunc(s.Members, func(a, b memberSpec) int { return strings.Compare(a.key(), b.key()) })
	s.sortModels()
}
