-- A message policy may name several approvers and need M of them (quorum).
-- Existing policies keep their one approver and need one approval.
ALTER TABLE agent_message_policies
    ADD COLUMN also_approvers TEXT[] NOT NULL DEFAULT '{}',
    ADD COLUMN approvals INT NOT NULL DEFAULT 0 CHECK (approvals BETWEEN 0 AND 10);

-- An exclusive hold's further named approvers (in-flight holds have none).
ALTER TABLE holds ADD COLUMN also_approvers TEXT[] NOT NULL DEFAULT '{}';
