package holdview

import "testing"

type bookNames struct{ groups, users map[string]string }

func (b bookNames) GroupName(id string) string { return b.groups[id] }
func (b bookNames) UserName(id string) string  { return b.users[id] }

func TestWordsNamesWhatTheReaderKnowsAndLeavesQuotesAlone(t *testing.T) {
	n := bookNames{
		groups: map[string]string{"ag_58c9f259ed843ec1": "research", "ag_ace555474e649065": "ops", "ag_0000000000000001": "Ops team"},
		users:  map[string]string{"telegram:dana": "Dana"},
	}
	for _, tc := range []struct{ in, want string }{
		{"held because the message policy ag_58c9f259ed843ec1 → ag_ace555474e649065 names telegram:dana; no policy → allow",
			"held because the message policy research → ops names Dana; no policy → allow"},
		{"admins-of-scope(group ag_58c9f259ed843ec1)", "admins-of-scope(group research)"},
		{"from=ag_58c9f259ed843ec1 to=ag_ace555474e649065", "from=research to=ops"},
		{"escalate to group:ag_58c9f259ed843ec1, telegram:dana.", "escalate to group:research, Dana."},
		// Not known to this reader: the id stays.
		{"to ag_0000000000000000 by slack:U1", "to ag_0000000000000000 by slack:U1"},
		// What an agent wrote, quoted by the server: byte for byte.
		{`message "tell ag_58c9f259ed843ec1 and telegram:dana" held`, `message "tell ag_58c9f259ed843ec1 and telegram:dana" held`},
		{`rejected: “ask ag_ace555474e649065”, by telegram:dana`, `rejected: “ask ag_ace555474e649065”, by Dana`},
		{`"esc \" ag_58c9f259ed843ec1" ag_58c9f259ed843ec1`, `"esc \" ag_58c9f259ed843ec1" research`},
		// A name after a command's flag is one shell word.
		{"(fix: ncl policies set --from ag_58c9f259ed843ec1 --to ag_ace555474e649065 --approver <user>)",
			"(fix: ncl policies set --from research --to ops --approver <user>)"},
		{"ncl roles grant --group ag_0000000000000001 --user telegram:dana", "ncl roles grant --group 'Ops team' --user Dana"},
		// Longer hex, or an id inside a word, is not a group id.
		{"ag_58c9f259ed843ec1ff xag_58c9f259ed843ec1", "ag_58c9f259ed843ec1ff xag_58c9f259ed843ec1"},
	} {
		if got := Words(n, tc.in); got != tc.want {
			t.Errorf("Words(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
	if got := Words(nil, "ag_58c9f259ed843ec1"); got != "ag_58c9f259ed843ec1" {
		t.Errorf("no names: got %q", got)
	}
}

func TestFactLinesSayWhatTheyMean(t *testing.T) {
	n := bookNames{users: map[string]string{"telegram:dana": "Dana", "telegram:erin": "Erin"}}
	for _, tc := range []struct {
		name, value string
		present     bool
		want        string
	}{
		{"policy_approvals", "0", true, "quorum 1"},
		{"policy_approvals", "2", true, "quorum 2"},
		{"policy_also", "", true, ""},
		{"policy_also", "telegram:erin", true, "also Erin"},
		{"policy_approver", "telegram:dana", true, "approver Dana"},
		{"policy_approver", "", false, "no message policy"},
		{"destination", "true", true, "a destination exists"},
		{"destination", "false", true, "no destination"},
		{"frozen_group", "telegram:dana", true, "the group is frozen by Dana"},
		{"frozen_all", "", false, ""},
		{"policy_mode", "", false, "the policy's mode: a2a.send's"},
		{"something_new", "7", true, "something_new = 7"},
		{"something_new", "", false, "something_new = (absent)"},
	} {
		if got := Fact(n, tc.name, tc.value, tc.present); got != tc.want {
			t.Errorf("Fact(%s=%q present=%v) = %q, want %q", tc.name, tc.value, tc.present, got, tc.want)
		}
	}
}
