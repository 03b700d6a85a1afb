-- Version 1: the outbox table, its notify trigger and the function the
-- trigger runs, and the table of tasks finished in a handler's
-- transaction. Idempotent, as every migration here: Migrate runs them all,
-- in order, at every start, after taking the table's lock. {{.Schema}},
-- {{.Table}}, {{.Function}}, {{.Trigger}} and {{.Finished}} are quoted
-- identifiers, filled in by Migrate.
CREATE SCHEMA IF NOT EXISTS {{.Schema}};

-- One row per task not yet moved into worqr. id is a UUIDv7 made by the
-- producer: time-ordered (the relay moves oldest first) and unique across
-- tables and databases (it becomes the task's unique key in Redis). The
-- options are NULL when not given. error and failed_at are set when worqr
-- refuses the task for good; the relay skips such rows.
CREATE TABLE IF NOT EXISTS {{.Table}} (
    id            uuid        PRIMARY KEY,
    queue         text        NOT NULL,
    payload       bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    run_at        timestamptz,
    front         boolean     NOT NULL DEFAULT false,
    max_attempts  integer,
    timeout_ms    bigint,
    retain_ms     bigint,
    priority      text,
    weight        integer,
    kind          text,
    unique_key    text,
    unique_ttl_ms bigint,
    error         text,
    failed_at     timestamptz
);

-- Wakes the relays: one notification per inserting statement, and
-- Postgres folds those of one transaction into one, delivered at commit.
-- The channel is schema.table, or a digest of it when that is over 63
-- bytes (as Outbox.Channel makes it).
CREATE OR REPLACE FUNCTION {{.Function}}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    channel text := TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME;
BEGIN
    IF octet_length(channel) > 63 THEN
        channel := 'worqr_outbox_' || md5(convert_to(channel, 'UTF8'));
    END IF;
    PERFORM pg_notify(channel, '');
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS {{.Trigger}} ON {{.Table}};
CREATE TRIGGER {{.Trigger}} AFTER INSERT ON {{.Table}}
    FOR EACH STATEMENT EXECUTE FUNCTION {{.Function}}();

-- One row per task a handler recorded as finished in its own transaction
-- (Outbox.FinishTx): a later attempt at the task (its finish was lost with
-- its worker) finds it and does not do the work again. Relays delete rows
-- older than RelayOptions.KeepFinished.
CREATE TABLE IF NOT EXISTS {{.Finished}} (
    queue       text        NOT NULL,
    task_id     text        NOT NULL,
    finished_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, task_id)
);
CREATE INDEX IF NOT EXISTS {{.FinishedIndex}} ON {{.Finished}} (finished_at);
