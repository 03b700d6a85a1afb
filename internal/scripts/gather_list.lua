-- List a queue's open gatherings (see AGG in common/aggregation.lua) in
-- deadline order, the next to flush first: limit of them from position
-- start. Each with its deadline (µs, Redis clock), the tasks it holds (a
-- ZLEXCOUNT: O(log N)) and the bytes they take in an aggregated task's
-- payload (-1 when the size hash holds none for it: measuring would read
-- the payloads, which a listing never does). O(limit log N) whatever the
-- gatherings hold.
-- Returns {open gatherings, then per gathering: key, deadline, tasks,
-- bytes}.
local gather_key, gather_due_key, gather_size_key = KEYS[1], KEYS[2], KEYS[3]
local start, limit = tonumber(ARGV[1]), tonumber(ARGV[2]) -- start >= 0, limit >= 1

local out = {redis.call('ZCARD', gather_due_key)}
local got = redis.call('ZRANGE', gather_due_key, start, start + limit - 1, 'WITHSCORES')
if #got == 0 then return out end
local keys = {}
for i = 1, #got, 2 do keys[#keys + 1] = got[i] end
local sizes = redis.call('HMGET', gather_size_key, unpack(keys))
for i = 1, #got, 2 do
  local key = got[i]
  out[#out + 1] = key
  out[#out + 1] = got[i + 1]
  out[#out + 1] = agg_lib().count(gather_key, key)
  out[#out + 1] = tonumber(sizes[(i + 1) / 2] or '') or -1
end
return out
