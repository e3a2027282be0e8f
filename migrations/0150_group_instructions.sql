-- create_agent's instructions, kept with the group so its agent starts with
-- them (the seed writes them into the new group's memory file). Existing
-- groups get none.
ALTER TABLE agent_groups ADD COLUMN instructions TEXT NOT NULL DEFAULT '';
