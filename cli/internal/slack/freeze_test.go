package slack

import "testing"

// Issue 32: the same freeze commands work from a Slack DM, as the sender.
func TestOwnerFreezesEveryAgentFromTheDM(t *testing.T) {
	e := newEnv(t)
	ownerID := e.User(owner, "owner", "")
	e.startBridge()

	e.sl.say(stranger, "", "/freeze all")
	e.textTo(dmOf(stranger), "Not done")
	e.sl.say(owner, "", "/freeze all incident 7")
	e.textTo(dmOf(owner), "Frozen: every agent")
	if by := e.Str(`SELECT frozen_by || ' ' || reason FROM freezes WHERE scope = 'all'`); by != ownerID+" incident 7" {
		t.Fatalf("freeze row = %q, want the owner's with the reason", by)
	}
	e.sl.say(owner, "", "/unfreeze all")
	e.textTo(dmOf(owner), "ncl unfreeze --all")
	if n := e.Str(`SELECT count(*)::text FROM freezes`); n != "1" {
		t.Fatalf("%s freezes after /unfreeze from chat, want the freeze kept", n)
	}
}
