-- Find the workers whose registry lease has expired and that no peer is
-- reclaiming already, claim them for the caller, and tell the caller when
-- the next live peer's lease runs out, so that it can be there at that
-- moment rather than at its next check.
--
-- A claim keeps the other live workers, all woken by the same expiry, from
-- reclaiming the same worker at once: one of them does the work and the
-- rest make this one call. A claim lasts claim ms; a claimer that dies
-- half-way leaves the worker to whoever looks after that. Claims live in
-- their own set: the registry's scores stay lease expiries, so a claimed
-- worker that was only slow still finds its lease gone and fences itself.
-- Deregistering a worker drops its claim; expired claims go here (in
-- registry_front).
-- Returns {now, next, worker, ...}: the Redis clock (ms), the earliest
-- expiry of another worker's live lease (ms; 0 if none), then at most
-- limit claimed workers.
--
-- Two calls when nobody has expired (the usual case): TIME and one ZRANGE
-- of the registry's first two entries.
local workers_key, reclaiming_key = KEYS[1], KEYS[2]
local limit, caller = tonumber(ARGV[1]), ARGV[2] -- caller: its own lease is not a peer's
local claim = tonumber(ARGV[3]) -- how long a claim lasts (ms)

local now = now_ms()
local front, dead = registry_front(workers_key, reclaiming_key, caller, now, limit)
local out = {now, 0}
if front[1] and front[1] ~= caller then
  out[2] = tonumber(front[2])
elseif front[3] then
  out[2] = tonumber(front[4])
end
if #dead > 0 then
  local until_ = ms(now + claim)
  for _, w in ipairs(dead) do
    redis.call('ZADD', reclaiming_key, until_, w)
    out[#out + 1] = w
  end
end
return out
