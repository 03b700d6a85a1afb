-- Version 2: a task's group (Group), for the relay to give worqr. NULL
-- when not given. Rows already waiting keep NULL and move as before.
ALTER TABLE {{.Table}} ADD COLUMN IF NOT EXISTS group_key text;
