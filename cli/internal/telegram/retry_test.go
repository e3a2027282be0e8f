package telegram

import (
	"strings"
	"testing"
)

// answered reports whether a button press was answered with text
// containing want, and whether any answer contains bad.
func (e *env) answered(want, bad string) (found, sawBad bool) {
	e.tg.mu.Lock()
	defer e.tg.mu.Unlock()
	for _, a := range e.tg.answers {
		found = found || strings.Contains(a, want)
		sawBad = sawBad || (bad != "" && strings.Contains(a, bad))
	}
	return found, sawBad
}

// Issue 29 (5, 12): a tap while the database cannot take the click (its
// write refused with SQLSTATE 53100, a full disk's answer, raised by a
// trigger) was answered "Failed: hold: the database refused the operation".
// It is asked again after the server's hint and lands once the database
// takes writes; the approver is told "Done.", never "Failed". A second tap
// of the same approver (or a click whose answer was lost) is that
// approver's approval, not "Not possible now".
func TestATapWhileTheDatabaseCannotTakeItLandsWhenItCan(t *testing.T) {
	e := newEnv(t)
	dana := e.user(danaID, "owner", "")
	e.startBridge()
	hold := e.RequestFor(dana, "the deploy key")
	card := e.card(danaID, hold)

	e.Exec(`CREATE FUNCTION fault_disk_full() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $$`)
	e.Exec(`CREATE TRIGGER fault_disk_full BEFORE INSERT ON hold_events FOR EACH ROW EXECUTE FUNCTION fault_disk_full()`)
	e.tg.tap(danaID, card, "Approve")
	e.Eventually(wait, "the bridge asking the click again", func() bool {
		return strings.Contains(e.Srv.Logs.String(), "click not taken now; asking again")
	})
	if st := e.HoldStatus(hold); st != "pending" {
		t.Fatalf("hold %s while the database refused writes", st)
	}
	e.Exec(`DROP TRIGGER fault_disk_full ON hold_events`)
	e.Exec(`DROP FUNCTION fault_disk_full()`)
	e.Eventually(wait, "the tap answered Done.", func() bool {
		done, _ := e.answered("Done.", "")
		return done
	})
	if _, failed := e.answered("Done.", "Failed"); failed {
		t.Fatalf("the approver was told a click failed: %v", e.tg.answers)
	}
	if st := e.HoldStatus(hold); st != "approved" {
		t.Fatalf("hold %s, want approved", st)
	}

	// Dana taps again: her approval stands; she is not told it failed.
	e.tg.mu.Lock()
	e.tg.answers = nil
	e.tg.mu.Unlock()
	e.tg.tap(danaID, card, "Approve")
	e.Eventually(wait, "the second tap answered", func() bool {
		e.tg.mu.Lock()
		defer e.tg.mu.Unlock()
		return len(e.tg.answers) > 0
	})
	if done, stale := e.answered("Done.", "Not possible"); !done || stale {
		t.Fatalf("second tap answered %v, want Done. (her own approval)", e.tg.answers)
	}
}
