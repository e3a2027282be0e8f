-- A quorum hold is delivered to more than one approver: the eligible
-- approvers with a known DM besides delivered_to. In-flight holds: none.
ALTER TABLE holds ADD COLUMN also_delivered_to TEXT[] NOT NULL DEFAULT '{}';
