package telegram

import (
	"testing"
)

// Issue 32: an owner freezes from the Telegram DM, and the freeze is the
// owner's (every decision of the group denies, its agents stop); a user
// without a role is told no and nothing is frozen; /freezes lists it by
// name; /unfreeze is pointed to the console and ncl (a chat message never
// lifts a freeze).
func TestOwnerFreezesAGroupFromTheDMAndAStrangerCannot(t *testing.T) {
	e := newEnv(t)
	e.Exec(`INSERT INTO agent_groups (id, name) VALUES ('ag_research', 'research')`)
	owner := e.user(ownerID, "owner", "")
	e.startBridge()

	e.tg.say(strangerID, strangerID, "/freeze all")
	e.textTo(strangerID, "Not done")
	if n := e.Str(`SELECT count(*)::text FROM freezes`); n != "0" {
		t.Fatalf("%s freezes after a stranger's /freeze, want 0", n)
	}

	e.tg.say(ownerID, ownerID, "/freeze group research runaway loop")
	e.textTo(ownerID, "Frozen: group research")
	if by := e.Str(`SELECT frozen_by || ' ' || reason FROM freezes WHERE scope = 'group' AND target = 'ag_research'`); by != owner+" runaway loop" {
		t.Fatalf("freeze row = %q, want the owner's with the reason", by)
	}
	e.tg.say(ownerID, ownerID, "/freezes")
	e.textTo(ownerID, "group research — by "+owner+": runaway loop")

	e.tg.say(ownerID, ownerID, "/freeze")
	e.textTo(ownerID, "Usage: /freeze")
	e.tg.say(ownerID, ownerID, "/unfreeze group research")
	e.textTo(ownerID, "ncl unfreeze --group research")
	if n := e.Str(`SELECT count(*)::text FROM freezes`); n != "1" {
		t.Fatalf("%s freezes after /unfreeze from chat, want the freeze kept", n)
	}
}
