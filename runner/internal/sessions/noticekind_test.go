package sessions

import (
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	agentv1 "github.com/clawguard/clawguard/proto/agent/v1"
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// TestPushedNoticeKeepsItsKind: a NotifyAgent push becomes the agent's
// notice by number (agentv1.NoticeKind(n.GetKind())), so every number the
// server's enum names must mean the same in the agent's.
func TestPushedNoticeKeepsItsKind(t *testing.T) {
	server := guardv1.NoticeKind(0).Descriptor().Values()
	agent := agentv1.NoticeKind(0).Descriptor().Values()
	for i := range server.Len() {
		v := server.Get(i)
		a := agent.ByNumber(v.Number())
		if a == nil || a.Name() != v.Name() {
			t.Errorf("guard.v1 %s = %d is %v in agent.v1", v.Name(), v.Number(), name(a))
		}
	}
}

func name(v protoreflect.EnumValueDescriptor) any {
	if v == nil {
		return "nothing"
	}
	return v.Name()
}
