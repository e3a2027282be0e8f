package resources

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/clawguard/clawguard/server/internal/approvals"

	"github.com/clawguard/clawguard/server/internal/fault"

	"github.com/jackc/pgx/v5"

	guardv1 "github.com/clawguard/clawguard/proto/guard/v1"
	"github.com/clawguard/clawguard/server/internal/paging"
	"github.com/clawguard/clawguard/server/internal/sessions"
	"github.com/clawguard/clawguard/server/internal/store"
)

// Config values are checked before they ever reach an image build or a
// container's limits (package names: pkgname).
var (
	// Docker-style limits: "1.5" CPUs, "512m" / "2g" memory.
	cpusValue   = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?|\.[0-9]+)$`)
	memoryValue = regexp.MustCompile(`^[0-9]+[bkmgBKMG]?$`)
	// An image reference or a host label: no spaces, no shell metacharacters.
	imageRef  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,254}$`)
	hostLabel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:=/-]{0,127}$`)
)

// checkPlacement validates the optional base image and pin: a host, or a
// key=value selector over runner token labels (placement.Matches).
func checkPlacement(image string, pin *string) error {
	if image != "" && !imageRef.MatchString(image) {
		return invalid("base_image", "%q is not an image reference", image)
	}
	if pin == nil || *pin == "" {
		return nil
	}
	if k, v, ok := strings.Cut(*pin, "="); ok {
		if !labelKey.MatchString(k) || !labelValue.MatchString(v) {
			return invalid("pinned_host", "%q is not a key=value label selector", *pin)
		}
		return nil
	}
	if !hostLabel.MatchString(*pin) {
		return invalid("pinned_host", "%q is not a host label", *pin)
	}
	return nil
}

const groupColumns = `g.id, g.name, g.base_image, g.pinned_host, g.created_at, g.instructions,
	COALESCE(c.cli_scope, 'group'), COALESCE(c.cpus, ''), COALESCE(c.memory, ''),
	COALESCE(c.apt_packages, '{}'), COALESCE(c.npm_packages, '{}'), COALESCE(c.mcp_servers, '[]'), COALESCE(c.version, 0),
	COALESCE(c.hold_approvals, 0), COALESCE(c.agent_command, '{}'), COALESCE(c.agent_env, '{}')`

const groupFrom = ` FROM agent_groups g LEFT JOIN container_configs c ON c.agent_group_id = g.id`

func scanGroup(row pgx.Row) (*guardv1.Group, error) {
	var (
		g       guardv1.Group
		created time.Time
		c       GroupConfig
		mcp     []byte
	)
	if err := row.Scan(&g.Id, &g.Name, &g.BaseImage, &g.PinnedHost, &created, &g.Instructions,
		&c.CLIScope, &c.CPUs, &c.Memory, &c.Apt, &c.Npm, &mcp, &c.Version, &c.HoldApprovals, &c.AgentCommand, &c.AgentEnv); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(mcp, &c.MCP); err != nil {
		return nil, fmt.Errorf("decode mcp_servers of %s: %w", g.Id, err)
	}
	g.CreatedAt = ts(created)
	var err error
	if g.Config, err = c.proto(); err != nil {
		return nil, fmt.Errorf("group %s: %w", g.Id, err)
	}
	return &g, nil
}

// ReadGroup reads a group with its container config (a group without a
// config row reads as the defaults) through q, a pool or a transaction. It
// applies no caller scoping: for infrastructure reads such as a runner's
// view of the sessions it hosts.
func ReadGroup(ctx context.Context, q store.Querier, id string) (*guardv1.Group, error) {
	return scanGroup(q.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, id))
}

// CreateGroup creates a group and its container config in one transaction;
// a taken name is AlreadyExists (the admin picks another).
func (s *Service) CreateGroup(ctx context.Context, req *guardv1.CreateGroupRequest) (_ *guardv1.CreateGroupResponse, err error) {
	defer store.Faulted(&err, "group")
	name, scope, err := checkCreateGroup(req)
	if err != nil {
		return nil, err
	}
	var g *guardv1.Group
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		id, _, err := CreateGroupTx(ctx, tx, NewGroup{Name: name, BaseImage: req.GetBaseImage(), PinnedHost: req.GetPinnedHost(), CLIScope: scope}, RefuseTakenName)
		if err != nil {
			return err
		}
		g, err = scanGroup(tx.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, id))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.CreateGroupResponse{Group: g}, nil
}

// NewGroup is an agent group to create (CreateGroupTx).
type NewGroup struct {
	Name         string // trimmed; required
	Instructions string // what its agent starts with (an agent's create_agent)
	BaseImage    string
	PinnedHost   string
	CLIScope     string // a cli_scope column value; "" is "group"
}

// TakenName says what CreateGroupTx does when the name is already a group's.
type TakenName int

const (
	// RefuseTakenName answers AlreadyExists and creates nothing: the name
	// was chosen on purpose — an admin's CreateGroup, or an agent's
	// create_agent whose approval was for exactly that name.
	RefuseTakenName TakenName = iota
	// SuffixTakenName takes the first free name of name-2 … name-50: the
	// name came as a chat reply (a channel registered to a new agent), and
	// the reply that creates the group reports the name it got.
	SuffixTakenName
)

// suffixAttempts bounds SuffixTakenName (name, name-2 … name-50).
const suffixAttempts = 50

// CreateGroupTx creates an agent group with its container config in the
// caller's transaction, and returns its id and the name it got. It is the
// one way a group comes to exist (admin CreateGroup, an agent's
// create_agent, inbound's "new agent" on channel registration), so every
// group has the same id shape (ag_ + 16 hex), the same name normalization
// (trimmed, non-empty) and a config row from the start; taken says how a
// name collision ends.
func CreateGroupTx(ctx context.Context, tx pgx.Tx, g NewGroup, taken TakenName) (id, name string, err error) {
	base := strings.TrimSpace(g.Name)
	if err := required("name", base); err != nil {
		return "", "", err
	}
	scope := g.CLIScope
	if scope == "" {
		scope = "group"
	}
	attempts := 1
	if taken == SuffixTakenName {
		attempts = suffixAttempts
	}
	for i := 1; i <= attempts; i++ {
		name = base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		id = store.NewID("ag_", 8)
		// ON CONFLICT: a taken name leaves the transaction usable for the
		// next candidate.
		tag, err := tx.Exec(ctx, `INSERT INTO agent_groups (id, name, instructions, base_image, pinned_host)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (name) DO NOTHING`, id, name, g.Instructions, g.BaseImage, g.PinnedHost)
		if err != nil {
			return "", "", fmt.Errorf("create agent group %q: %w", name, err)
		}
		if tag.RowsAffected() == 0 {
			continue
		}
		if _, err := tx.Exec(ctx, `INSERT INTO container_configs (agent_group_id, cli_scope) VALUES ($1, $2)`, id, scope); err != nil {
			return "", "", fmt.Errorf("create container config of %s: %w", id, err)
		}
		return id, name, nil
	}
	if taken == SuffixTakenName {
		return "", "", fault.Existsf("agent group names %q to %q are all taken", base, fmt.Sprintf("%s-%d", base, suffixAttempts))
	}
	return "", "", fault.Existsf("agent group named %q already exists", base)
}

// GetGroup reads a group; a group the caller may not see reads as NotFound.
func (s *Service) GetGroup(ctx context.Context, req *guardv1.GetGroupRequest) (_ *guardv1.GetGroupResponse, err error) {
	defer store.Faulted(&err, "group")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	if !v.sees(req.GetId()) {
		return nil, notFound("group %q not found", req.GetId())
	}
	g, err := scanGroup(s.pool.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, req.GetId()))
	if store.IsNoRows(err) {
		return nil, notFound("group %q not found", req.GetId())
	}
	if err != nil {
		return nil, err
	}
	return &guardv1.GetGroupResponse{Group: g}, nil
}

// ListGroups lists a page of the groups the caller may see, by name.
func (s *Service) ListGroups(ctx context.Context, req *guardv1.ListGroupsRequest) (_ *guardv1.ListGroupsResponse, err error) {
	defer store.Faulted(&err, "groups")
	v, err := s.viewer(ctx)
	if err != nil {
		return nil, err
	}
	limit, err := paging.Limit(req.GetLimit())
	if err != nil {
		return nil, err
	}
	// Keyset paging (name, id), bound to the viewer.
	filter := paging.Filter("groups", v.all, v.groups)
	cur, err := paging.DecodeKey(req.GetPageToken(), filter)
	if err != nil {
		return nil, err
	}
	afterName, afterID := "", ""
	if cur != nil {
		afterName, afterID = cur.Key, cur.ID
	}
	rows, err := s.pool.Query(ctx, `SELECT `+groupColumns+groupFrom+` WHERE ($1 OR g.id = ANY($2))
		AND ($3 = '' OR (g.name, g.id) > ($4, $3)) ORDER BY g.name, g.id LIMIT $5`, v.all, v.groups, afterID, afterName, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := &guardv1.ListGroupsResponse{}
	for rows.Next() {
		if len(out.Groups) == limit {
			// One row past the page: there is a next one.
			last := out.Groups[limit-1]
			out.NextPageToken = paging.NextKey(last.GetName(), last.GetId(), filter)
			break
		}
		g, err := scanGroup(rows)
		if err != nil {
			return nil, err
		}
		out.Groups = append(out.Groups, g)
	}
	return out, rows.Err()
}

// UpdateGroup renames, re-images or re-pins a group (empty = unchanged;
// a re-pin moves sessions off runners the new pin does not match). A
// new base image is a container change: the config version is bumped and
// every active session gets a rebuild.
func (s *Service) UpdateGroup(ctx context.Context, req *guardv1.UpdateGroupRequest) (_ *guardv1.UpdateGroupResponse, err error) {
	defer store.Faulted(&err, "group")
	if err := checkUpdateGroup(req); err != nil {
		return nil, err
	}
	var g *guardv1.Group
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var oldImage, oldInstructions string
		err := tx.QueryRow(ctx, `SELECT base_image, instructions FROM agent_groups WHERE id = $1 FOR UPDATE`, req.GetId()).Scan(&oldImage, &oldInstructions)
		if store.IsNoRows(err) {
			return notFound("group %q not found", req.GetId())
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE agent_groups SET
			name = COALESCE(NULLIF($2, ''), name),
			base_image = COALESCE(NULLIF($3, ''), base_image),
			pinned_host = COALESCE($4, pinned_host),
			instructions = COALESCE($5, instructions)
			WHERE id = $1`, req.GetId(), strings.TrimSpace(req.GetName()), req.GetBaseImage(), req.PinnedHost, req.Instructions); err != nil {
			return err
		}
		if req.Instructions != nil && req.GetInstructions() != oldInstructions {
			// The runner writes them into the workspace as a session starts.
			if _, err := configChanged(ctx, tx, req.GetId(), "the group's instructions changed", false); err != nil {
				return err
			}
		}
		if req.PinnedHost != nil {
			// Sessions the new pin does not match leave their runner; the
			// lease sweep places them on one it does.
			if _, err := sessions.UnplaceTx(ctx, tx, req.GetId(), ""); err != nil {
				return err
			}
		}
		if req.GetBaseImage() != "" && req.GetBaseImage() != oldImage {
			if _, err := configChanged(ctx, tx, req.GetId(), "base image changed", true); err != nil {
				return err
			}
		}
		g, err = scanGroup(tx.QueryRow(ctx, `SELECT `+groupColumns+groupFrom+` WHERE g.id = $1`, req.GetId()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.UpdateGroupResponse{Group: g}, nil
}

// groupCascade is the seed's group-delete set (groups.test.ts), in delete
// order: each step removes one kind of dependent row, through the package
// that owns its table, and is counted. The foreign keys cascade the same
// rows; deleting them explicitly first is what makes the counts exact.
var groupCascade = []struct {
	key    string
	delete func(ctx context.Context, tx pgx.Tx, group string) (int64, error)
}{
	{"holds", func(ctx context.Context, tx pgx.Tx, g string) (int64, error) {
		return approvals.DeleteGroupHoldsTx(ctx, tx, g)
	}},
	{"pending_questions", deleteWhere(`DELETE FROM pending_questions WHERE agent_group_id = $1 OR session_id IN (SELECT id FROM sessions WHERE agent_group_id = $1)`)},
	{"agent_destinations_owned", deleteWhere(`DELETE FROM agent_destinations WHERE agent_group_id = $1`)},
	{"agent_destinations_pointing", deleteWhere(`DELETE FROM agent_destinations WHERE target_agent_group_id = $1`)},
	{"pending_channel_registrations", deleteWhere(`DELETE FROM pending_channel_registrations WHERE agent_group_id = $1`)},
	{"messaging_group_agents", deleteWhere(`DELETE FROM messaging_group_agents WHERE agent_group_id = $1`)},
	{"agent_group_members", deleteWhere(`DELETE FROM agent_group_members WHERE agent_group_id = $1`)},
	{"user_roles", deleteWhere(`DELETE FROM user_roles WHERE agent_group_id = $1`)},
	{"agent_message_policies", deleteWhere(`DELETE FROM agent_message_policies WHERE from_agent_group_id = $1 OR to_agent_group_id = $1`)},
	{"container_configs", deleteWhere(`DELETE FROM container_configs WHERE agent_group_id = $1`)},
	{"sessions", func(ctx context.Context, tx pgx.Tx, g string) (int64, error) {
		return sessions.DeleteGroupTx(ctx, tx, g)
	}},
}

// deleteWhere is a cascade step of one of this package's tables: sql
// deletes a group's rows ($1).
func deleteWhere(sql string) func(ctx context.Context, tx pgx.Tx, group string) (int64, error) {
	return func(ctx context.Context, tx pgx.Tx, group string) (int64, error) {
		tag, err := tx.Exec(ctx, sql, group)
		return tag.RowsAffected(), err
	}
}

// DeleteGroup deletes a group and every row that depends on it, in one
// transaction, and counts what went per table.
func (s *Service) DeleteGroup(ctx context.Context, req *guardv1.DeleteGroupRequest) (_ *guardv1.DeleteGroupResponse, err error) {
	defer store.Faulted(&err, "group")
	if err := required("id", req.GetId()); err != nil {
		return nil, err
	}
	removed := map[string]int64{}
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM agent_groups WHERE id = $1 FOR UPDATE`, req.GetId()).Scan(&id)
		if store.IsNoRows(err) {
			return notFound("group %q not found", req.GetId())
		}
		if err != nil {
			return err
		}
		for _, c := range groupCascade {
			n, err := c.delete(ctx, tx, id)
			if err != nil {
				return fmt.Errorf("delete %s: %w", c.key, err)
			}
			removed[c.key] = n
		}
		_, err = tx.Exec(ctx, `DELETE FROM agent_groups WHERE id = $1`, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &guardv1.DeleteGroupResponse{Removed: removed}, nil
}
