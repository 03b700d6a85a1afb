-- List a queue's periodic schedules: each name, its last tick enqueued (ms;
-- or when it was first seen) and the ticks hash's record of it: the id of
-- that tick's task ('' if none is known: no tick yet, or enqueued by a
-- worqr that did not keep it), then ',<next tick ms>' when known (see
-- tick.lua).
-- Returns {name, last tick, record, ...}.
local periodic_key, ticks_key = KEYS[1], KEYS[2]

local out = {}
local all = redis.call('HGETALL', periodic_key)
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = all[i + 1]
  out[#out + 1] = redis.call('HGET', ticks_key, all[i]) or ''
end
return out
