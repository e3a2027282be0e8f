package mcpcall

// Effects an operator sets on a tool or as a server's default.
const (
	EffectAllow = "allow"
	EffectHold  = "hold"
	EffectDeny  = "deny"
)

// Where an effective effect comes from.
const (
	FromTool          = "tool"
	FromServerDefault = "server default"
	FromBuiltIn       = "built-in"
)

// Setting is a tool's setting or a server's default: Effect "" is unset,
// Approvals 0 and Mode "" inherit.
type Setting struct {
	Effect    string
	Approvals int
	Mode      string
}

// Effective is what a call of the tool gets.
type Effective struct {
	Effect    string
	Source    string // FromTool, FromServerDefault or FromBuiltIn
	Approvals int    // 0: the approval chain's settings
	Mode      string // "": the catalog action's mode
}

// Resolve is the one rule: the tool's effect, else the server's default,
// else hold; quorum and mode are the tool's where it sets them, else the
// server default's. An effect that is not one of the three holds (fail
// closed: it never allows).
func Resolve(tool, server Setting) Effective {
	out := Effective{Effect: EffectHold, Source: FromBuiltIn}
	switch {
	case tool.Effect != "":
		out.Effect, out.Source = tool.Effect, FromTool
	case server.Effect != "":
		out.Effect, out.Source = server.Effect, FromServerDefault
	}
	if out.Effect != EffectAllow && out.Effect != EffectDeny {
		out.Effect = EffectHold
	}
	out.Approvals, out.Mode = server.Approvals, server.Mode
	if tool.Effect != "" && tool.Approvals > 0 {
		out.Approvals = tool.Approvals
	}
	if tool.Effect != "" && tool.Mode != "" {
		out.Mode = tool.Mode
	}
	return out
}
