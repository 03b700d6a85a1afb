-- Cancel a task by payload: remove every waiting copy, mark every in-flight
-- copy cancelled (so a holder that missed the message still finds out), and
-- publish the cancel event.
-- KEYS: waiting, procs, meta
-- ARGV: channel, task
-- Returns {removed, marked}.
local removed = redis.call('LREM', KEYS[1], 0, ARGV[2])
local marked = 0
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) == 'a' and proc_task(v) == ARGV[2] then
    redis.call('HSET', KEYS[2], all[i], 'c' .. string.sub(v, 2))
    marked = marked + 1
  end
end
publish(ARGV[1], 'c' .. last_pid(KEYS[3]) .. ':' .. ARGV[2])
return {removed, marked}
