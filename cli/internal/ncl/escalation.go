package ncl

import (
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
