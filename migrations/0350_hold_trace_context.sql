-- A hold keeps the W3C trace context (traceparent) of the request that
-- created it (issue 33): the approval's span links to that trace, and the
-- replay push carries it so the runner's replay continues it. '' when the
-- request was not traced.
ALTER TABLE holds ADD COLUMN trace_parent text NOT NULL DEFAULT ''
    CHECK (length(trace_parent) <= 128);
