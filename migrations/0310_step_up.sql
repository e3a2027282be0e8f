-- Step-up (issue 34): a catalog action whose holds a tap in chat may not
-- approve: the approver confirms after a fresh sign-in (the console within
-- its step-up window, or their own token). Global-scope admin commands
-- need it whatever this says.
ALTER TABLE action_settings ADD COLUMN step_up BOOLEAN NOT NULL DEFAULT false;
