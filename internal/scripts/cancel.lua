-- Cancel tasks by payload: remove every waiting or delayed task with this
-- payload (and its recorded error), mark every in-flight one cancelled (so
-- a holder that missed the event still finds out), and publish a cancel
-- event naming the in-flight tasks. Retained tasks are unlisted (see
-- outcome_pending), and those removed before they started are announced
-- to waiters with an 'x<id>,<id>...' event, as no outcome will come.
-- KEYS: waiting, procs, delayed, errors, unique, high, low, stats, retained
-- ARGV: channel, payload
-- Returns {removed, marked}.
--
-- A few waiting matches are replaced by a tombstone each (LSET) and removed
-- with one LREM; many are removed by writing the list again without them,
-- since each LSET walks the list: the cost stays linear in its length.
set_lists(KEYS[1], KEYS[6], KEYS[7])
local ids = {}
local unlist = {} -- the retained entries removed
-- Each level's list in turn.
for _, list in ipairs({KEYS[1], KEYS[6], KEYS[7]}) do
  local at, found = {}, 0
  local len = redis.call('LLEN', list)
  for start = 0, len - 1, 1000 do
    local chunk = redis.call('LRANGE', list, start, start + 999)
    for j, e in ipairs(chunk) do
      if entry_payload(e) == ARGV[2] then
        ids[#ids + 1] = entry_id(e)
        found = found + 1
        release_unique(KEYS[5], e)
        if header_has(e, 'R') then unlist[#unlist + 1] = e end
        if #at <= 16 then
          at[#at + 1] = start + j - 1
        end
      end
    end
  end
  if found > 16 then
    local keep = {}
    for start = 0, len - 1, 1000 do
      for _, e in ipairs(redis.call('LRANGE', list, start, start + 999)) do
        if entry_payload(e) ~= ARGV[2] then
          keep[#keep + 1] = e
        end
      end
    end
    redis.call('DEL', list)
    for i = 1, #keep, 1000 do
      redis.call('RPUSH', list, unpack(keep, i, math.min(i + 999, #keep)))
    end
  elseif found > 0 then
    for _, i in ipairs(at) do
      redis.call('LSET', list, i, TOMBSTONE)
    end
    redis.call('LREM', list, 0, TOMBSTONE)
  end
end
for _, e in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  if entry_payload(e) == ARGV[2] then
    redis.call('ZREM', KEYS[3], e)
    ids[#ids + 1] = entry_id(e)
    release_unique(KEYS[5], e)
    if header_has(e, 'R') then unlist[#unlist + 1] = e end
  end
end
local removed = #ids
for i = 1, #ids, 1000 do
  redis.call('HDEL', KEYS[4], unpack(ids, i, math.min(i + 999, #ids)))
end
local gone = outcome_unlisted(KEYS[9], unlist)
for i = 1, #gone, 1000 do
  publish(ARGV[1], 'x' .. table.concat(gone, ',', i, math.min(i + 999, #gone)))
end
local marked, held = {}, {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local v = all[i + 1]
  if proc_state(v) == 'a' and entry_payload(proc_task(v)) == ARGV[2] then
    redis.call('HSET', KEYS[2], all[i], 'c' .. string.sub(v, 2))
    marked[#marked + 1] = entry_id(proc_task(v))
    if header_has(proc_task(v), 'R') then held[#held + 1] = proc_task(v) end
  end
end
outcome_unlisted(KEYS[9], held)
stat('x', removed + #marked)
stats_flush(KEYS[8])
if #marked > 0 then
  publish(ARGV[1], 'c' .. table.concat(marked, ','))
end
return {removed, #marked}
