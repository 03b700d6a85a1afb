-- Run one delayed task now: move it, by id, from the delayed set to the back
-- of its queue (or to its place in its group), as promote.lua moves one
-- that is due, its due time ('d') set to now so that its wait is measured
-- from now, and wake the queue.
-- Returns 1 when it moved the task, 0 when the queue has no delayed task of
-- that id (it ran, or was never delayed).
local delayed_key, waiting_key, idle_key, high_key, low_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local gwait_key, gready_key = KEYS[6], KEYS[7] -- see GROUPS in common/waiting.lua
local channel, id, pattern = ARGV[1], ARGV[2], ARGV[3] -- pattern: the ZSCAN pattern for the id (see find_dead)

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key)
local e = find_dead(delayed_key, id, pattern) -- any sorted set of entries
if not e then
  return 0
end
redis.call('ZREM', delayed_key, e)
push_waiting(entry_due_now(e), waiting_key)
wake(idle_key, channel, 1)
return 1
