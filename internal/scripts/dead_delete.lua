-- Delete one dead letter and its error. A sequence it held (see
-- sequence_died) goes on, and the queue's runtimes are woken for it.
-- Returns 1 when deleted, 0 when there was no such dead letter.
local dead_key, errors_key, meta_key, idle_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local gwait_key, gready_key, glimits_key = KEYS[5], KEYS[6], KEYS[7] -- see GROUPS in common/waiting.lua
local id, pattern = ARGV[1], ARGV[2] -- the task's id, and the ZSCAN pattern for it (see find_dead)
local channel = ARGV[3]

local e = find_dead(dead_key, id, pattern)
if not e then
  return 0
end
redis.call('ZREM', dead_key, e)
errors_drop(errors_key, {id})
set_lists(nil, nil, nil, gwait_key, gready_key, nil, glimits_key)
if dead_letters_gone(meta_key, {e}) > 0 then
  wake(idle_key, channel, 1)
end
return 1
