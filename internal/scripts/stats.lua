-- Write what a client counted for a queue (see stats_add) when none of the
-- queue's dequeue, finish or retry calls carried it: the queue went idle,
-- or the client is closing.
-- Returns 1.
local stats_key, meta_key = KEYS[1], KEYS[2]
local counts = ARGV[1] -- stats counted by the client (see stats_add)

stats_client(stats_key, meta_key, counts)
return 1
