-- Workers' leases: a worker's on a queue, and the front of the worker
-- registry, which reclaimers read.

-- A lease is live while its expiry score lies in the future.
local function lease_live(leases, worker, now)
  local score = redis.call('ZSCORE', leases, worker)
  return score and tonumber(score) > now
end

-- What a reclaimer needs from the worker registry (see reclaim.go): its
-- first two live leases, as {worker, expiry (ms), ...} (the first that is
-- not a caller's own is the next to run out), and up to limit workers
-- other than self whose lease expired and that no peer has claimed (claims
-- in reclaiming, see expired.lua; those run out go here), and whether
-- such a worker waits (1, else 0), self included (limit 0 asks only
-- that). Only the front of the registry is read: while nobody has
-- expired, which is the usual case, that is one ZRANGE of its first two
-- entries.
local function registry_front(workers, reclaiming, self, now, limit)
  local front = redis.call('ZRANGE', workers, 0, 1, 'WITHSCORES')
  local dead, unclaimed = {}, 0
  if front[2] and tonumber(front[2]) <= now then
    local claimed = redis.call('ZCARD', reclaiming)
    if claimed > 0 then
      redis.call('ZREMRANGEBYSCORE', reclaiming, '-inf', ms(now))
      claimed = redis.call('ZCARD', reclaiming)
    end
    -- A claim is made only on an expired lease, which is never renewed,
    -- and goes with its worker: every claim is of an expired worker, so
    -- one waits unclaimed exactly when more have expired than are
    -- claimed, that is when an expired entry lies past the first claimed
    -- ones. One call however many are claimed (a call per claim here once
    -- made every renewal of a starved fleet cost hundreds); not ZCOUNT,
    -- which a restricted ACL user (see the README) is not granted.
    if #redis.call('ZRANGEBYSCORE', workers, '-inf', ms(now), 'LIMIT', claimed, 1) > 0 then
      unclaimed = 1
    end
    if unclaimed > 0 and limit > 0 then
      local taken = {}
      if claimed > 0 then
        for _, w in ipairs(redis.call('ZRANGE', reclaiming, 0, -1)) do
          taken[w] = true
        end
      end
      -- Enough expired workers for limit unclaimed ones besides self.
      local expired = redis.call('ZRANGEBYSCORE', workers, '-inf', ms(now), 'LIMIT', 0, limit + claimed + 1)
      for _, w in ipairs(expired) do
        if #dead == limit then break end
        if w ~= self and not taken[w] then
          dead[#dead + 1] = w
        end
      end
    end
    front = redis.call('ZRANGEBYSCORE', workers, '(' .. ms(now), '+inf', 'WITHSCORES', 'LIMIT', 0, 2)
  end
  return front, dead, unclaimed
end
