-- Requeue one dead letter: its task goes to the back of the queue with its
-- id, payload and own budget, its count of starts reset and its D, W and K
-- fields removed; its error is dropped, and so is the outcome its death
-- left if it is retained (see dead_outcome_cleared); the queue's runtimes
-- are woken (see wake), and the queue is made to exist again if it lost
-- its name.
-- KEYS: dead, errors, waiting, meta, idle, high, low, stats, results,
--       retained
-- ARGV: channel, queue name, task id, ZSCAN pattern for the id (see
--       find_dead)
-- Returns {requeued (0/1), unregistered (0/1)}: unregistered as in
-- enqueue.lua, when the caller must register the queue.
set_lists(KEYS[3], KEYS[6], KEYS[7])
local e = find_dead(KEYS[1], ARGV[3], ARGV[4])
if not e then
  return {0, 0}
end
redis.call('ZREM', KEYS[1], e)
redis.call('HDEL', KEYS[2], ARGV[3])
dead_outcome_cleared(KEYS[9], KEYS[10], {e})
local revived = dead_revived(e)
redis.call('LPUSH', list_of(revived, KEYS[3]), revived)
wake(KEYS[5], ARGV[1], 1)
stat('q', 1)
stats_flush(KEYS[8])
return {1, ensure_queue(KEYS[4], ARGV[2])}
