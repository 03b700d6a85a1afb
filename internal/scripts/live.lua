-- List workers whose lease is live, with the milliseconds it has left,
-- their info (see register.lua; '' for a worker registered without) and
-- their handler slots (see worker_slots.lua; '' for none).
-- Returns {worker, ms left, info, slots, ...}.
local workers_key, info_key, slots_key = KEYS[1], KEYS[2], KEYS[3] -- the registry, the workers' info, their slots

local now = now_ms()
local out = {}
local all = redis.call('ZRANGEBYSCORE', workers_key, '(' .. ms(now), '+inf', 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = ms(tonumber(all[i + 1]) - now)
  out[#out + 1] = redis.call('HGET', info_key, all[i]) or ''
  out[#out + 1] = redis.call('HGET', slots_key, all[i]) or ''
end
return out
