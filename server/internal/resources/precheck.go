package resources

import (
	"github.com/clawguard/clawguard/proto/agentenv"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/proto/mcpcall"
	"github.com/clawguard/clawguard/proto/secret"
)

// Precheck runs the checks a mutation's request must pass before anything
// is read or written: the very functions its handler starts with. The
// admin guard runs it before consulting the guard, so an agent's call the
// handler would refuse is refused (InvalidArgument) and never becomes a
// hold a human approves only to see it fail. A request with no checks of
// its own passes. Checks that need the database (a group that exists, a
// name not taken) stay in the handler: the database may change between a
// hold and its approval.
func (s *Service) Precheck(msg proto.Message) error {
	var err error
	switch r := msg.(type) {
	case *guardv1.CreateGroupRequest:
		_, _, err = checkCreateGroup(r)
	case *guardv1.UpdateGroupRequest:
		err = checkUpdateGroup(r)
	case *guardv1.DeleteGroupRequest:
		err = required("id", r.GetId())
	case *guardv1.UpdateGroupConfigRequest:
		_, err = checkUpdateGroupConfig(r)
	case *guardv1.AddGroupPackageRequest:
		err = checkAddGroupPackage(r)
	case *guardv1.RemoveGroupPackageRequest:
		err = checkRemoveGroupPackage(r)
	case *guardv1.AddGroupMcpServerRequest:
		err = checkAddGroupMcpServer(r)
	case *guardv1.RemoveGroupMcpServerRequest:
		err = checkRemoveGroupMcpServer(r)
	case *guardv1.FreezeRequest:
		err = checkFreeze(r)
	case *guardv1.UnfreezeRequest:
		err = checkUnfreeze(r)
	case *guardv1.RestartGroupRequest:
		err = required("group", r.GetGroup())
	case *guardv1.AddDestinationRequest:
		err = checkAddDestination(r)
	case *guardv1.RemoveDestinationRequest:
		err = checkGroupAndName(r.GetGroup(), r.GetName())
	case *guardv1.AddMemberRequest:
		err = checkMember(r.GetGroup(), r.GetUserId())
	case *guardv1.RemoveMemberRequest:
		err = checkMember(r.GetGroup(), r.GetUserId())
	case *guardv1.GrantRoleRequest:
		_, err = validGrant(r.GetUserId(), r.GetRole(), r.GetScope(), r.GetGroup())
	case *guardv1.RevokeRoleRequest:
		_, err = validGrant(r.GetUserId(), r.GetRole(), r.GetScope(), r.GetGroup())
	case *guardv1.CreateUserRequest:
		err = validUserID("id", r.GetId())
	case *guardv1.UpdateUserRequest:
		err = required("id", r.GetId())
	case *guardv1.CreateWiringRequest:
		err = checkCreateWiring(r)
	case *guardv1.DeleteWiringRequest:
		err = required("id", r.GetId())
	case *guardv1.CreateMessagingGroupRequest:
		_, err = checkCreateMessagingGroup(r)
	case *guardv1.UpdateMessagingGroupRequest:
		_, err = checkUpdateMessagingGroup(r)
	case *guardv1.DeleteMessagingGroupRequest:
		err = required("id", r.GetId())
	case *guardv1.SetPolicyRequest:
		_, _, err = checkSetPolicy(r)
	case *guardv1.RemovePolicyRequest:
		err = checkPolicyEnds(r.GetFromGroup(), r.GetToGroup())
	case *guardv1.SetUserDmRequest:
		err = checkSetUserDm(r)
	case *guardv1.RemoveUserDmRequest:
		err = checkRemoveUserDm(r)
	case *guardv1.BindOidcRequest:
		err = checkOidcBinding(r.GetUserId(), r.GetIssuer(), r.GetSubject())
	case *guardv1.UnbindOidcRequest:
		err = checkOidcBinding(r.GetUserId(), r.GetIssuer(), r.GetSubject())
	case *guardv1.CreateTokenRequest:
		_, err = checkCreateToken(r)
	case *guardv1.RevokeTokenRequest:
		err = required("id", r.GetId())
	case *guardv1.SetActionSettingsRequest:
		_, err = s.checkSetActionSettings(r)
	case *guardv1.SetMcpServerDefaultRequest:
		_, err = checkSetMcpServerDefault(r)
	case *guardv1.SetMcpToolRequest:
		_, err = checkSetMcpTool(r)
	case *guardv1.SetEgressRuleRequest:
		_, err = checkSetEgressRule(r)
	case *guardv1.UnsetEgressRuleRequest:
		_, _, err = checkEgressTarget(r.GetGroup(), r.GetHost(), r.GetPort())
	case *guardv1.SetEgressDefaultRequest:
		_, err = checkSetEgressDefault(r)
	case *guardv1.SetModelProvidersRequest:
		_, err = checkSetModelProviders(r)
	case *guardv1.SetModelRuleRequest:
		_, err = checkSetModelRule(r)
	case *guardv1.UnsetModelRuleRequest:
		err = checkModelTarget(r.GetGroup(), r.GetProvider(), r.GetModel())
	case *guardv1.SetModelDefaultRequest:
		_, err = checkSetModelDefault(r)
	case *guardv1.SetModelBudgetRequest:
		_, err = checkSetModelBudget(r)
	case *guardv1.SetModelProviderRequest:
		_, _, _, err = checkSetModelProvider(r)
	case *guardv1.SetModelPriceRequest:
		err = checkModelPrice(r.GetPrice())
	}
	return err
}

// checkMcpServerOf: a group and a name that can name a guarded MCP server.
func checkMcpServerOf(group, server string) error {
	if err := required("group", group); err != nil {
		return err
	}
	if !mcpcall.ValidServer(server) {
		return invalid("server", "%q is not an MCP server name", server)
	}
	return nil
}

func checkSetMcpServerDefault(r *guardv1.SetMcpServerDefaultRequest) (mcpSettingRow, error) {
	if err := checkMcpServerOf(r.GetGroup(), r.GetServer()); err != nil {
		return mcpSettingRow{}, err
	}
	return mcpSettingArgs(r.GetEffect(), r.GetApprovals(), r.GetMode())
}

func checkSetMcpTool(r *guardv1.SetMcpToolRequest) (mcpSettingRow, error) {
	if err := checkMcpServerOf(r.GetGroup(), r.GetServer()); err != nil {
		return mcpSettingRow{}, err
	}
	if !mcpcall.ValidTool(r.GetTool()) {
		return mcpSettingRow{}, invalid("tool", "%q is not a tool name", r.GetTool())
	}
	return mcpSettingArgs(r.GetEffect(), r.GetApprovals(), r.GetMode())
}

func checkCreateGroup(r *guardv1.CreateGroupRequest) (name, scope string, err error) {
	name = strings.TrimSpace(r.GetName())
	if err := required("name", name); err != nil {
		return "", "", err
	}
	if scope, err = enumColumn("cli_scope", r.GetCliScope()); err != nil {
		return "", "", err
	}
	pin := r.GetPinnedHost()
	return name, scope, checkPlacement(r.GetBaseImage(), &pin)
}

func checkUpdateGroup(r *guardv1.UpdateGroupRequest) error {
	if err := required("id", r.GetId()); err != nil {
		return err
	}
	if r.GetName() != "" && strings.TrimSpace(r.GetName()) == "" {
		return invalid("name", "blank")
	}
	return checkPlacement(r.GetBaseImage(), r.PinnedHost)
}

// envName is an environment variable's name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkUpdateGroupConfig(r *guardv1.UpdateGroupConfigRequest) (scope string, err error) {
	if err := required("group", r.GetGroup()); err != nil {
		return "", err
	}
	if scope, err = enumColumn("cli_scope", r.GetCliScope()); err != nil {
		return "", err
	}
	if r.Cpus != nil && *r.Cpus != "" && !cpusValue.MatchString(*r.Cpus) {
		return "", invalid("cpus", "%q is not a number of CPUs (e.g. 1.5)", *r.Cpus)
	}
	if r.Memory != nil && *r.Memory != "" && !memoryValue.MatchString(*r.Memory) {
		return "", invalid("memory", "%q is not a memory size (e.g. 512m, 2g)", *r.Memory)
	}
	if r.HoldApprovals != nil {
		if err := validApprovals("hold_approvals", *r.HoldApprovals); err != nil {
			return "", err
		}
	}
	for k := range r.GetAgentEnv() {
		if !envName.MatchString(k) {
			return "", invalid("agent_env", "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
		}
		if agentenv.Reserved(k) {
			return "", invalid("agent_env", "%s is the runner's own variable (its gateway, workspace and identity, HOME, the proxy, model endpoint and CA variables): it cannot be set", k)
		}
	}
	if r.AgentCommand != nil && len(r.GetAgentCommand().GetArgs()) > 0 && strings.TrimSpace(r.GetAgentCommand().GetArgs()[0]) == "" {
		return "", invalid("agent_command", "the command's first word is blank")
	}
	return scope, nil
}

func checkAddGroupPackage(r *guardv1.AddGroupPackageRequest) error {
	if err := required("group", r.GetGroup()); err != nil {
		return err
	}
	_, valid, err := packageList(&GroupConfig{}, r.GetManager())
	if err != nil {
		return err
	}
	if len(r.GetPackages()) == 0 {
		return invalid("packages", "required")
	}
	for _, p := range r.GetPackages() {
		if !valid(p) {
			return invalid("packages", "%q is not a valid package name", p)
		}
	}
	return nil
}

func checkRemoveGroupPackage(r *guardv1.RemoveGroupPackageRequest) error {
	if err := required("group", r.GetGroup()); err != nil {
		return err
	}
	if _, _, err := packageList(&GroupConfig{}, r.GetManager()); err != nil {
		return err
	}
	return required("package", r.GetPackage())
}

func checkAddGroupMcpServer(r *guardv1.AddGroupMcpServerRequest) error {
	if err := required("group", r.GetGroup()); err != nil {
		return err
	}
	srv := r.GetServer()
	if srv == nil {
		return invalid("server", "required")
	}
	if !mcpcall.ValidServer(srv.GetName()) {
		return invalid("server.name", "%q is not a valid MCP server name (letters, digits, . _ -; at most 128)", srv.GetName())
	}
	if img := srv.GetImage(); img != "" && !imageRef.MatchString(img) {
		return invalid("server.image", "%q is not an image reference", img)
	}
	if refs := secret.References(r); len(refs) > 0 && !r.GetReplace() {
		return invalid(refs[0], "%q keeps the value of the server it replaces: only with replace", secret.Redacted)
	}
	return required("server.command", strings.TrimSpace(srv.GetCommand()))
}

func checkRemoveGroupMcpServer(r *guardv1.RemoveGroupMcpServerRequest) error {
	if err := required("group", r.GetGroup()); err != nil {
		return err
	}
	return required("name", r.GetName())
}

func checkAddDestination(r *guardv1.AddDestinationRequest) error {
	if err := checkGroupAndName(r.GetGroup(), r.GetName()); err != nil {
		return err
	}
	if (r.GetTargetGroup() == "") == (r.GetTargetMessagingGroup() == "") {
		return invalid("target_group", "set exactly one of target_group and target_messaging_group")
	}
	return nil
}

func checkGroupAndName(group, name string) error {
	if err := required("group", group); err != nil {
		return err
	}
	return required("name", name)
}

func checkMember(group, user string) error {
	if err := required("group", group); err != nil {
		return err
	}
	return required("user_id", user)
}

func checkCreateWiring(r *guardv1.CreateWiringRequest) error {
	if err := required("messaging_group", r.GetMessagingGroup()); err != nil {
		return err
	}
	return required("group", r.GetGroup())
}

func checkCreateMessagingGroup(r *guardv1.CreateMessagingGroupRequest) (policy string, err error) {
	if err := required("channel_type", strings.TrimSpace(r.GetChannelType())); err != nil {
		return "", err
	}
	if err := required("platform_id", strings.TrimSpace(r.GetPlatformId())); err != nil {
		return "", err
	}
	return enumColumn("unknown_sender_policy", r.GetUnknownSenderPolicy())
}

func checkUpdateMessagingGroup(r *guardv1.UpdateMessagingGroupRequest) (policy string, err error) {
	if err := required("id", r.GetId()); err != nil {
		return "", err
	}
	return enumColumn("unknown_sender_policy", r.GetUnknownSenderPolicy())
}

// checkSetPolicy returns the policy's mode column and its further
// approvers, de-duplicated.
func checkSetPolicy(r *guardv1.SetPolicyRequest) (mode string, also []string, err error) {
	if err := checkPolicyEnds(r.GetFromGroup(), r.GetToGroup()); err != nil {
		return "", nil, err
	}
	if err := validUserID("approver_user_id", r.GetApproverUserId()); err != nil {
		return "", nil, err
	}
	if mode, err = enumColumn("mode", r.GetMode()); err != nil {
		return "", nil, err
	}
	also = []string{}
	seen := map[string]bool{r.GetApproverUserId(): true}
	for _, u := range r.GetAlsoApproverUserIds() {
		if err := validUserID("also_approver_user_ids", u); err != nil {
			return "", nil, err
		}
		if !seen[u] {
			seen[u] = true
			also = append(also, u)
		}
	}
	if err := validApprovals("approvals", r.GetApprovals()); err != nil {
		return "", nil, err
	}
	// A quorum the named approvers cannot reach would hold every message forever.
	if n := int(r.GetApprovals()); n > 1+len(also) {
		return "", nil, invalid("approvals", "%d approvals need at least %d distinct approvers; the policy names %d", n, n, 1+len(also))
	}
	if _, err := checkEscalation(r.GetRemindAfter(), r.GetEscalateAfter(), r.GetEscalateTo()); err != nil {
		return "", nil, err
	}
	return mode, also, nil
}

func checkPolicyEnds(from, to string) error {
	if err := required("from_group", from); err != nil {
		return err
	}
	return required("to_group", to)
}

func checkSetUserDm(r *guardv1.SetUserDmRequest) error {
	if err := required("user_id", r.GetUserId()); err != nil {
		return err
	}
	if err := required("channel_type", strings.TrimSpace(r.GetChannelType())); err != nil {
		return err
	}
	return required("address", strings.TrimSpace(r.GetAddress()))
}

func checkRemoveUserDm(r *guardv1.RemoveUserDmRequest) error {
	if err := required("user_id", r.GetUserId()); err != nil {
		return err
	}
	return required("channel_type", r.GetChannelType())
}

// newToken is a checked CreateTokenRequest, normalized.
type newToken struct {
	kind, runnerID, userID, host string
	labels                       map[string]string
	channels                     []string
}

func checkCreateToken(r *guardv1.CreateTokenRequest) (newToken, error) {
	var t newToken
	kind, err := enumColumn("kind", r.GetKind())
	if err != nil {
		return t, err
	}
	if kind == "" {
		return t, invalid("kind", "required: operator, runner, bridge or user")
	}
	t.kind, t.runnerID, t.userID = kind, strings.TrimSpace(r.GetRunnerId()), strings.TrimSpace(r.GetUserId())
	if kind == "runner" {
		if t.runnerID == "" {
			return t, invalid("runner_id", "required for a runner token")
		}
	} else if t.runnerID != "" {
		return t, invalid("runner_id", "only runner tokens are bound to a runner")
	}
	if t.host, t.labels, t.channels, err = checkTokenBindings(kind, r); err != nil {
		return t, err
	}
	if kind == "user" {
		if t.userID == "" {
			return t, invalid("user_id", "required for a user token")
		}
	} else if t.userID != "" {
		return t, invalid("user_id", "only user tokens act as a user")
	}
	return t, nil
}

// checkSetActionSettings returns the catalog entry the setting is for.
func (s *Service) checkSetActionSettings(r *guardv1.SetActionSettingsRequest) (*guardv1.CatalogEntry, error) {
	if err := required("action", r.GetAction()); err != nil {
		return nil, err
	}
	if err := validApprovals("approvals", r.GetApprovals()); err != nil {
		return nil, err
	}
	if _, err := enumColumn("mode", r.GetMode()); err != nil {
		return nil, err
	}
	if _, err := checkEscalation(r.GetRemindAfter(), r.GetEscalateAfter(), r.GetEscalateTo()); err != nil {
		return nil, err
	}
	entry := s.catalogEntry(r.GetAction())
	if entry == nil {
		return nil, invalid("action", "%q is not a catalog action (ncl catalog list)", r.GetAction())
	}
	return entry, nil
}
