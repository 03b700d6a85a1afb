-- Cancel one task by id: remove it (and its recorded error) if it waits or
-- is delayed, or mark it cancelled if it is in flight (so a holder that
-- missed the event still finds out) and publish a cancel event naming it.
-- A retained task is unlisted (see outcome_pending); one removed before it
-- started is announced to waiters with an 'x<id>' event, as no outcome
-- will come (an in-flight one's cancel event tells them).
-- KEYS: waiting, procs, delayed, errors, unique, high, low, stats, retained
-- ARGV: channel, task id
-- Returns {removed, marked}: each 0 or 1.
set_lists(KEYS[1], KEYS[6], KEYS[7])
local id = ARGV[2]
local function removed(e)
  if #outcome_unlisted(KEYS[9], {e}) > 0 then
    publish(ARGV[1], 'x' .. id)
  end
end
for _, list in ipairs({KEYS[1], KEYS[6], KEYS[7]}) do
  local len = redis.call('LLEN', list)
  for start = 0, len - 1, 1000 do
    local chunk = redis.call('LRANGE', list, start, start + 999)
    for j, e in ipairs(chunk) do
      if entry_id(e) == id then
        redis.call('LSET', list, start + j - 1, TOMBSTONE)
        redis.call('LREM', list, 1, TOMBSTONE)
        redis.call('HDEL', KEYS[4], id)
        release_unique(KEYS[5], e)
        removed(e)
        stat('x', 1)
        stats_flush(KEYS[8])
        return {1, 0}
      end
    end
  end
end
for _, e in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if entry_id(e) == id then
    redis.call('ZREM', KEYS[3], e)
    redis.call('HDEL', KEYS[4], id)
    release_unique(KEYS[5], e)
    removed(e)
    stat('x', 1)
    stats_flush(KEYS[8])
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
    outcome_unlisted(KEYS[9], {proc_task(v)})
    publish(ARGV[1], 'c' .. id)
    stat('x', 1)
    stats_flush(KEYS[8])
    return {0, 1}
  end
end
return {0, 0}
