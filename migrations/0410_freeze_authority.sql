-- Lifting a freeze needs the authority that made it (issue 41): a group's
-- admin may lift what a group's admin froze, never what the fleet's
-- authority (the operator, an owner, a global admin) froze. The row says
-- which. Freezes carried over are the fleet's unless a group freeze was
-- made by someone who is not an owner or global admin today.
ALTER TABLE freezes ADD COLUMN authority TEXT NOT NULL DEFAULT 'fleet' CHECK (authority IN ('fleet', 'group'));

UPDATE freezes f SET authority = 'group'
 WHERE f.scope = 'group' AND f.frozen_by <> 'operator'
   AND NOT EXISTS (SELECT 1 FROM user_roles r WHERE r.user_id = f.frozen_by
                    AND (r.role = 'owner' OR (r.role = 'admin' AND r.agent_group_id IS NULL)));
