-- List workers whose lease is live, with the milliseconds it has left and
-- their info (see register.lua; false for a worker registered without).
-- Returns {worker, ms left, info, ...}.
local workers_key, info_key = KEYS[1], KEYS[2] -- the registry, the workers' info

local now = now_ms()
local out = {}
local all = redis.call('ZRANGEBYSCORE', workers_key, '(' .. ms(now), '+inf', 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = ms(tonumber(all[i + 1]) - now)
  out[#out + 1] = redis.call('HGET', info_key, all[i]) or ''
end
return out
