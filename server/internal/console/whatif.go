package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/holdview"
)

// What-if: a dry run of the guard (Guard.Decide with dry_run), asked as
// `ncl explain` asks it.

type whatifData struct {
	Actions                          []string
	Action, Actor, Resource, Payload string
	Answer                           *guardv1.DecideResponse
	Error                            string
	// Command is the `ncl explain` that asks the same question: every
	// field that changes the answer, as typed.
	Command string
}

func (c *Console) whatifForm(r *http.Request, s *session) whatifData {
	d := whatifData{}
	if cat, err := callAll[*guardv1.ListCatalogResponse](c, r, s, guardv1.Registry_ListCatalog_FullMethodName, &guardv1.ListCatalogRequest{}); err == nil {
		for _, e := range cat.GetEntries() {
			d.Actions = append(d.Actions, e.GetAction())
		}
	}
	return d
}

func (c *Console) whatifPage(w http.ResponseWriter, r *http.Request, s *session) {
	d := c.whatifForm(r, s)
	d.Action, d.Actor = "a2a.send", "agent:"
	c.render(w, r, http.StatusOK, "whatif", s, "What if", d)
}

func (c *Console) whatif(w http.ResponseWriter, r *http.Request, s *session) {
	d := c.whatifForm(r, s)
	d.Action = strings.TrimSpace(r.PostFormValue("action"))
	d.Actor = strings.TrimSpace(r.PostFormValue("actor"))
	d.Resource = r.PostFormValue("resource")
	d.Payload = strings.TrimSpace(r.PostFormValue("payload"))
	req, err := whatifRequest(d)
	if err != nil {
		d.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "whatif", s, "What if", d)
		return
	}
	// Groups and users by name or id, as ncl explain takes them.
	n := namesOf(r)
	if ag := req.GetActor().GetAgent(); ag != nil {
		ag.AgentGroupId = n.groupID(ag.GetAgentGroupId())
	}
	if hu := req.GetActor().GetHuman(); hu != nil {
		hu.UserId = n.userID(hu.GetUserId())
	}
	for _, k := range holdview.GroupResourceKeys[req.GetAction()] {
		if v, ok := req.Resource[k]; ok {
			req.Resource[k] = n.targetID(v, req.GetActor().GetAgent().GetAgentGroupId())
		}
	}
	d.Command = explainCommand(d)
	resp, err := call[*guardv1.DecideResponse](c, r, s, guardv1.Guard_Decide_FullMethodName, req)
	if err != nil {
		d.Error = status.Convert(err).Message()
		code := http.StatusBadRequest
		if status.Code(err) == codes.PermissionDenied {
			code = http.StatusForbidden
		}
		c.render(w, r, code, "whatif", s, "What if", d)
		return
	}
	d.Answer = resp
	c.render(w, r, http.StatusOK, "whatif", s, "What if", d)
}

// whatifRequest reads the form the way `ncl explain` reads its flags.
func whatifRequest(d whatifData) (*guardv1.DecideRequest, error) {
	req := &guardv1.DecideRequest{Action: d.Action, DryRun: true, Resource: map[string]string{}}
	if d.Action == "" {
		return nil, fmt.Errorf("action: required (see the catalog)")
	}
	kind, rest, _ := strings.Cut(d.Actor, ":")
	switch kind {
	case "host":
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Host{Host: &guardv1.HostActor{}}}
	case "agent":
		group, sess, _ := strings.Cut(rest, ":")
		if group == "" {
			return nil, fmt.Errorf("actor: agent:<group>[:<session>] needs a group")
		}
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Agent{Agent: &guardv1.AgentActor{AgentGroupId: group, SessionId: sess}}}
	case "human":
		if rest == "" {
			return nil, fmt.Errorf("actor: human:<user> needs a user, e.g. human:telegram:dana")
		}
		req.Actor = &guardv1.Actor{Kind: &guardv1.Actor_Human{Human: &guardv1.HumanActor{UserId: rest}}}
	default:
		return nil, fmt.Errorf("actor: want host, agent:<group>[:<session>] or human:<user>")
	}
	for _, line := range strings.FieldsFunc(d.Resource, func(r rune) bool { return r == '\n' || r == ',' }) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		if !ok || k == "" {
			return nil, fmt.Errorf("resource: %q is not key=value", line)
		}
		req.Resource[k] = v
	}
	if d.Payload != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(d.Payload), &m); err != nil {
			return nil, fmt.Errorf("payload: not a JSON object: %v", err)
		}
		p, err := structpb.NewStruct(m)
		if err != nil {
			return nil, fmt.Errorf("payload: %v", err)
		}
		req.Payload = p
	}
	return req, nil
}

// explainCommand is the ncl explain of a what-if form: the action, the
// actor, each resource pair and the payload, each quoted for a POSIX shell.
func explainCommand(d whatifData) string {
	parts := []string{"ncl", "explain", "--action", shellQuote(d.Action), "--actor", shellQuote(d.Actor)}
	for _, line := range strings.FieldsFunc(d.Resource, func(r rune) bool { return r == '\n' || r == ',' }) {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, "--resource", shellQuote(line))
		}
	}
	if d.Payload != "" {
		var b bytes.Buffer
		p := d.Payload
		if json.Compact(&b, []byte(p)) == nil {
			p = b.String()
		}
		parts = append(parts, "--payload", shellQuote(p))
	}
	return strings.Join(parts, " ")
}

// shellQuote leaves a plain word as it is and single-quotes anything else.
func shellQuote(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_.:=/@+,%", r)) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
