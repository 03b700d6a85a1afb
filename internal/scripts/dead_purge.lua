-- Delete every dead letter of a queue and their errors. The errors hash
-- also holds the errors of tasks waiting for a retry, so only the dead
-- letters' fields go, 1,000 at a time. Every sequence held on a dead
-- task (see sequence_died) goes on, and the queue's runtimes are woken
-- for them.
-- Returns the number of dead letters deleted.
local dead_key, errors_key, meta_key, idle_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local gwait_key, gready_key, glimits_key = KEYS[5], KEYS[6], KEYS[7] -- see GROUPS in common/waiting.lua
local channel = ARGV[1]

local n = redis.call('ZCARD', dead_key)
for i = 0, n - 1, 1000 do
  local chunk = redis.call('ZRANGE', dead_key, i, i + 999)
  local ids = {}
  for j, e in ipairs(chunk) do
    ids[j] = entry_id(e)
  end
  if #ids > 0 then
    errors_drop(errors_key, ids)
  end
end
redis.call('DEL', dead_key)
set_lists(nil, nil, nil, gwait_key, gready_key, nil, glimits_key)
local released = dead_holds_released(meta_key)
if released > 0 then
  wake(idle_key, channel, released)
end
return n
