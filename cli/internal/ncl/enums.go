package ncl

import (
	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
)

// The enum descriptors the nouns' flags are parsed and listed by.
var (
	roleEnum         = guardv1.Role(0).Descriptor()
	roleScopeEnum    = guardv1.RoleScope(0).Descriptor()
	senderPolicyEnum = guardv1.SenderPolicy(0).Descriptor()
	principalEnum    = guardv1.Principal(0).Descriptor()
	effectEnum       = guardv1.Effect(0).Descriptor()
)
