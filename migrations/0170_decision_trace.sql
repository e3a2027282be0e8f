-- What a catalog decision's baseline read (facts, resource, the entry's
-- TraceArgs), so the log can explain the decision later in words
-- (guard.Explain). NULL for non-catalog actions and for rows logged before
-- this migration (they explain without their checks). Adding a nullable
-- column rewrites nothing.
ALTER TABLE decisions ADD COLUMN trace JSONB;
