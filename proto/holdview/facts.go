package holdview

import (
	"strconv"
	"strings"
)

// Fact is one fact an explanation read, in words a person reads ("quorum
// 1", "approver Dana", "a destination exists"), or "" when the fact says
// nothing worth a line (no further approvers). The value as read stays in
// the explanation's JSON; a fact this table does not know prints as
// "name = value".
func Fact(n Names, name, value string, present bool) string {
	if w, ok := factWords[name]; ok {
		return w(n, value, present)
	}
	if !present {
		return name + " = (absent)"
	}
	return name + " = " + value
}

var factWords = map[string]func(n Names, v string, present bool) string{
	"destination":      yesNo("a destination exists", "no destination"),
	"target_exists":    yesNo("the target group exists", "the target group does not exist"),
	"group_exists":     yesNo("the group exists", "the group does not exist"),
	"policy_approver":  person("no message policy", "approver "),
	"policy_also":      people("also "),
	"policy_approvals": quorum("quorum "),
	"policy_mode":      setting("the policy's mode: ", "a2a.send's"),
	"cli_scope":        setting("CLI scope: ", "the default"),
	"tool_effect":      setting("the tool's setting: ", "none (the server's applies)"),
	"tool_mode":        setting("the tool's mode: ", "none"),
	"tool_approvals":   quorum("the tool's quorum "),
	"server_effect":    setting("the server's setting: ", "none (mcp.call's applies)"),
	"server_mode":      setting("the server's mode: ", "none"),
	"server_approvals": quorum("the server's quorum "),
	"egress_default":   setting("the group's egress default: ", "the runner's"),
	"frozen_all":       frozen("everything"),
	"frozen_group":     frozen("the group"),
	"frozen_runner":    frozen("the runner"),
}

func yesNo(yes, no string) func(Names, string, bool) string {
	return func(_ Names, v string, present bool) string {
		if present && v == "true" {
			return yes
		}
		return no
	}
}

func person(none, prefix string) func(Names, string, bool) string {
	return func(n Names, v string, present bool) string {
		if !present || v == "" {
			return none
		}
		return prefix + User(n, v)
	}
}

func people(prefix string) func(Names, string, bool) string {
	return func(n Names, v string, _ bool) string {
		ids := strings.Fields(v)
		if len(ids) == 0 {
			return ""
		}
		for i, id := range ids {
			ids[i] = User(n, id)
		}
		return prefix + strings.Join(ids, ", ")
	}
}

// quorum: 0 or unset is one approval (the column's default).
func quorum(prefix string) func(Names, string, bool) string {
	return func(_ Names, v string, present bool) string {
		if !present {
			return ""
		}
		q, err := strconv.Atoi(v)
		if err != nil {
			return prefix + v
		}
		return prefix + strconv.Itoa(max(q, 1))
	}
}

func setting(prefix, unset string) func(Names, string, bool) string {
	return func(_ Names, v string, present bool) string {
		if !present || v == "" {
			return prefix + unset
		}
		return prefix + v
	}
}

func frozen(what string) func(Names, string, bool) string {
	return func(n Names, v string, present bool) string {
		if !present || v == "" {
			return ""
		}
		return what + " is frozen by " + User(n, v)
	}
}
