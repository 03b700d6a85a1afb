-- Renew workers' registry leases and, in the same call, their leases on
-- queues (on a single Redis, where one script may touch keys of every
-- slot; on a Cluster each queue lease is renewed apart, by renew.lua), and
-- tell their reclaimers what they would otherwise ask the registry for:
-- when the next peer's lease runs out, and whether a dead worker waits
-- that no peer has claimed. A healthy fleet thus makes no reclaim look of
-- its own (see reclaim.go). One call renews one worker, or the workers of
-- one client that renew together (see lease.go). An expired lease is
-- never revived: its worker must treat itself as dead.
-- KEYS: workers, reclaiming, then the leases of each worker's queues, in
-- the order of ARGV
-- ARGV: ttl (ms), then per worker: its id and how many of KEYS are its
-- queues' leases
-- Returns {now, dead, first, its expiry, the second's expiry, then per
-- worker its registry lease, then each of its queue leases}: the Redis
-- clock (ms); 1 when an expired worker waits unclaimed, else 0; the first
-- live lease in the registry after the renewals ("" and 0 if none) and the
-- second's expiry (0 if none): the next lease to run out is the first's,
-- or the second's for the first worker itself; then 1 for a lease
-- renewed, -1 for one gone (and a worker whose registry lease is gone has
-- its queue leases left alone, as 0).
--
-- A lease costs a ZSCORE, and each lease key one ZADD however many
-- workers it renews (not ZMSCORE: a restricted ACL user, see the README,
-- is not granted it): for one worker serving one queue, while nobody has
-- expired (the usual case), six calls in all with TIME and one ZRANGE of
-- the registry's first two entries; while some have, five more at most
-- (the claims counted, one look past them at the expired, and the next
-- live leases), however many have expired or are claimed.
local now = now_ms()
local expiry = ms(now + tonumber(ARGV[1]))
local out = {now, 0, '', 0, 0}
-- Per lease key, the ZADD arguments of the leases renewed there, so that
-- each key takes one ZADD however many workers it renews.
local adds, keys = {}, {}
local function renew(key, w)
  if not lease_live(key, w, now) then
    return -1
  end
  local add = adds[key]
  if not add then
    add = {}
    adds[key], keys[#keys + 1] = add, key
  end
  add[#add + 1], add[#add + 2] = expiry, w
  return 1
end

local k = 3
for i = 2, #ARGV, 2 do
  local w, n = ARGV[i], tonumber(ARGV[i + 1])
  local live = renew(KEYS[1], w)
  out[#out + 1] = live
  for j = k, k + n - 1 do
    out[#out + 1] = live > 0 and renew(KEYS[j], w) or 0
  end
  k = k + n
end
for _, key in ipairs(keys) do
  redis.call('ZADD', key, unpack(adds[key]))
end

local front, _, unclaimed = registry_front(KEYS[1], KEYS[2], nil, now, 0)
if unclaimed > 0 then
  out[2] = 1
end
if front[1] then
  out[3], out[4] = front[1], tonumber(front[2])
end
if front[3] then
  out[5] = tonumber(front[4])
end
return out
