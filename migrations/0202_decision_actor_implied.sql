-- A decision's actor is stored only when its columns do not imply it: an
-- agent's is {agent_group_id, session_id}, already in their own columns, and
-- a host's or the system's is its kind. Only a human's (the user id) needs
-- the JSON. NULL for the rest saves ~90 bytes of WAL per decision and a jsonb
-- parse; readers rebuild it from the kind and the columns.
ALTER TABLE decisions ALTER COLUMN actor DROP NOT NULL;
