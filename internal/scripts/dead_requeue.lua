-- Requeue one dead letter: its task goes to the back of the queue with its
-- id, payload and own budget, its count of starts reset and its D, W and K
-- fields removed; its error is dropped, and so is the outcome its death
-- left if it is retained (see dead_outcome_cleared); the queue's runtimes
-- are woken (see wake), and the queue is made to exist again if it lost
-- its name. A sequence it held (see sequence_died) goes on with it at
-- its front.
-- Returns {requeued (0/1), unregistered (0/1)}: unregistered as in
-- enqueue.lua, when the caller must register the queue.
local dead_key, errors_key, waiting_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local idle_key, high_key, low_key, stats_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local results_key, retained_key, gwait_key, gready_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local flows_key, glimits_key = KEYS[13], KEYS[14] -- workflow tasks' notices (see flow_notice); see GROUPS in common/waiting.lua
local channel, queue = ARGV[1], ARGV[2] -- queue: its name
local id, pattern = ARGV[3], ARGV[4] -- the task's id, and the ZSCAN pattern for it (see find_dead)

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, nil, glimits_key)
local e = find_dead(dead_key, id, pattern)
if not e then
  return {0, 0}
end
redis.call('ZREM', dead_key, e)
errors_drop(errors_key, {id})
dead_outcome_cleared(results_key, retained_key, {e})
dead_letters_gone(meta_key, {e})
local revived = dead_revived(e)
push_waiting(revived, waiting_key)
flow_notice(flows_key, revived, 'revived')
wake(idle_key, channel, 1)
stat('q', 1)
stats_flush(stats_key)
return {1, ensure_queue(meta_key, queue)}
