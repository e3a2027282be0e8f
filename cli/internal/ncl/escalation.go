package ncl

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/protobuf/types/known/durationpb"
)

// escalationFlags are a hold's escalation plan as ncl catalog set and ncl
// policies set take it (issue 32).
type escalationFlags struct {
	remind, escalate time.Duration
	to               []string
}

func (e *escalationFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&e.remind, "remind-after", 0, "remind the approvers of a hold still pending after this long (0 = never)")
	fs.DurationVar(&e.escalate, "escalate-after", 0, "add the --escalate-to approvers to a hold still pending after this long (0 = never)")
	fs.StringArrayVar(&e.to, "escalate-to", nil, "a user (id or name) or group:NAME (that group's admins) to escalate to; repeat for several")
}

// durations are the plan's delays as the API takes them (nil: never).
func (e *escalationFlags) durations() (remind, escalate *durationpb.Duration) {
	if e.remind > 0 {
		remind = durationpb.New(e.remind)
	}
	if e.escalate > 0 {
		escalate = durationpb.New(e.escalate)
	}
	return remind, escalate
}

const escalationHelp = `--remind-after D: a hold still pending after D is sent to its approvers
again. --escalate-after D --escalate-to WHO: after D, WHO (a user by id or
name, or group:NAME for that group's admins; repeat for several) may
approve it too and get the card. Each step happens once, on one server
replica. At the hold's expiry it is denied, as always. Names are resolved
now; an unknown one is refused.`

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
