-- Where the webhook notifier is in hold_events, per webhook URL. One replica
-- at a time posts (it holds an advisory lock); whichever takes over resumes
-- from here, so a restart or failover neither skips nor re-posts a run of
-- events (at most the one in flight is posted again).
CREATE TABLE webhook_progress (
    url        TEXT PRIMARY KEY CHECK (url <> ''),
    cursor     BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);
