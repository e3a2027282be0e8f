-- Whether each approval counted toward its hold's quorum (issue 29): NULL
-- while the hold is pending, when eligibility is judged at each read and
-- click from the approvers' current roles and the hold's current rule; set
-- when the quorum is met, true for the approvals that met it and false for
-- those of approvers no longer eligible then (kept for the record).
ALTER TABLE hold_approvals ADD COLUMN counted BOOLEAN;
