-- Trust boundaries (issue 12): what a runner or bridge token may speak for
-- is set by the operator on the token, never declared by its holder.
--
-- Runner tokens carry the placement identity of their runner: the host and
-- labels group pins are matched against. A runner's registration may narrow
-- them, never widen them. A token without host and labels (every runner
-- token minted before this migration) is "unbound": its runner is placed only
-- the sessions of unpinned groups, and what it declares is ignored.
--
-- Bridge tokens carry the channel namespaces they speak for ("telegram",
-- "slack"): the users they may assert, the chats they may route. A bridge
-- token without channels (every one minted before this migration) asserts
-- nobody until it is recreated with --channel.
ALTER TABLE tokens
    ADD COLUMN host     TEXT   NOT NULL DEFAULT '',
    ADD COLUMN labels   JSONB  NOT NULL DEFAULT '{}',
    ADD COLUMN channels TEXT[] NOT NULL DEFAULT '{}';

ALTER TABLE tokens
    ADD CONSTRAINT tokens_placement_is_runners CHECK (kind = 'runner' OR (host = '' AND labels = '{}'::jsonb)),
    ADD CONSTRAINT tokens_labels_object CHECK (jsonb_typeof(labels) = 'object'),
    ADD CONSTRAINT tokens_channels_are_bridges CHECK (kind = 'bridge' OR channels = '{}');
