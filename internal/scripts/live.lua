-- List workers whose lease is live, with the milliseconds it has left.
-- Returns {worker, ms left, ...}.
local workers_key = KEYS[1]

local now = now_ms()
local out = {}
local all = redis.call('ZRANGEBYSCORE', workers_key, '(' .. ms(now), '+inf', 'WITHSCORES')
for i = 1, #all, 2 do
  out[#out + 1] = all[i]
  out[#out + 1] = ms(tonumber(all[i + 1]) - now)
end
return out
