-- Find the workers whose registry lease has expired and that no peer is
-- reclaiming already, claim them for the caller, and tell the caller when
-- the next live peer's lease runs out, so that it can be there at that
-- moment rather than at its next check.
--
-- A claim keeps the other live workers, all woken by the same expiry, from
-- reclaiming the same worker at once: one of them does the work and the
-- rest make this one call. A claim lasts ARGV[3] ms; a claimer that dies
-- half-way leaves the worker to whoever looks after that. Claims live in
-- their own set: the registry's scores stay lease expiries, so a claimed
-- worker that was only slow still finds its lease gone and fences itself.
-- Deregistering a worker drops its claim; expired claims go here.
-- KEYS: workers, reclaiming
-- ARGV: limit, caller (its own lease is not a peer's), claim (ms)
-- Returns {now, next, worker, ...}: the Redis clock (ms), the earliest
-- expiry of another worker's live lease (ms; 0 if none), then at most
-- limit claimed workers.
--
-- Three calls when nobody is claimed (the usual case): TIME, ZCARD and one
-- ZRANGE of the registry's front, which holds the expired workers (the
-- lowest scores) and then the next ones to expire.
local now = now_ms()
local limit = tonumber(ARGV[1])
local claimed = redis.call('ZCARD', KEYS[2])
if claimed > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ms(now))
  claimed = redis.call('ZCARD', KEYS[2])
end
local out = {now, 0}
local until_ = ms(now + tonumber(ARGV[3]))
-- Enough of the front for limit unclaimed expired workers, the caller
-- and the next live peer.
local front = redis.call('ZRANGE', KEYS[1], 0, limit + claimed + 1, 'WITHSCORES')
for i = 1, #front, 2 do
  local w, score = front[i], tonumber(front[i + 1])
  if score > now then
    if w ~= ARGV[2] then
      out[2] = score
      break
    end
  elseif w ~= ARGV[2] and #out - 2 < limit and (claimed == 0 or not redis.call('ZSCORE', KEYS[2], w)) then
    redis.call('ZADD', KEYS[2], until_, w)
    out[#out + 1] = w
  end
end
return out
