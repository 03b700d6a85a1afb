-- Cancel one task by id: remove it (and its recorded error) if it waits or
-- is delayed, or mark it cancelled if it is in flight (so a holder that
-- missed the event still finds out) and publish a cancel event naming it.
-- KEYS: waiting, procs, delayed, errors, unique
-- ARGV: channel, task id
-- Returns {removed, marked}: each 0 or 1.
local id = ARGV[2]
local len = redis.call('LLEN', KEYS[1])
for start = 0, len - 1, 1000 do
  local chunk = redis.call('LRANGE', KEYS[1], start, start + 999)
  for j, e in ipairs(chunk) do
    if entry_id(e) == id then
      redis.call('LSET', KEYS[1], start + j - 1, TOMBSTONE)
      redis.call('LREM', KEYS[1], 1, TOMBSTONE)
      redis.call('HDEL', KEYS[4], id)
      release_unique(KEYS[5], e)
      return {1, 0}
    end
  end
end
for _, e in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if entry_id(e) == id then
    redis.call('ZREM', KEYS[3], e)
    redis.call('HDEL', KEYS[4], id)
    release_unique(KEYS[5], e)
    return {1, 0}
  end
end
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local v = all[i + 1]
  if entry_id(proc_task(v)) == id then
    if proc_state(v) ~= 'a' then
      return {0, 0} -- already cancelled, or its queue deleted
    end
    redis.call('HSET', KEYS[2], all[i], 'c' .. string.sub(v, 2))
    publish(ARGV[1], 'c' .. id)
    return {0, 1}
  end
end
return {0, 0}
