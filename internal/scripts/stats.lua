-- Write what a client counted for a queue (see stats_add) when none of the
-- queue's dequeue, finish or retry calls carried it: the queue went idle,
-- or the client is closing.
-- KEYS: stats, meta
-- ARGV: stats counted by the client
-- Returns 1.
stats_client(KEYS[1], KEYS[2], ARGV[1])
return 1
