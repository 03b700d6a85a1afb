-- Renew workers' registry leases and, in the same call, their leases on
-- queues (on a single Redis, where one script may touch keys of every
-- slot; on a Cluster each queue lease is renewed apart, by renew.lua), and
-- tell their reclaimers what they would otherwise ask the registry for:
-- when the next peer's lease runs out, and whether a dead worker waits
-- that no peer has claimed. A healthy fleet thus makes no reclaim look of
-- its own (see reclaim.go). One call renews one worker, or the workers of
-- one client that renew together (see lease.go). An expired lease is
-- never revived: its worker must treat itself as dead.
-- Returns {now, dead, first, its expiry, the second's expiry, the
-- registry's live workers, then per worker its registry lease, then each of its
-- queue leases}: the Redis clock (ms); 1 when an expired worker waits
-- unclaimed, else 0; the first live lease in the registry ("" and 0 if
-- none) and the second's expiry (0 if none), after the renewals (for one
-- worker alone, maybe before: the same answer): the next lease to run out
-- is the first's, or the second's for the first worker itself; how many
-- live leases the registry holds, after the renewals (a reclaimer's
-- chance of looking when a lease runs out is its share of them: a fleet
-- sends a few looks, not one per process, see reclaim.go; the dead are
-- not counted, for they do not look: the survivors of a fleet that mostly
-- died must each look the more); then 1 for a lease renewed, -1 for
-- one gone (and a worker whose registry lease is gone has its queue leases
-- left alone, as 0).
--
-- Each lease key takes one ZADD however many workers it renews (GT: a
-- lease that runs out later already, after the Redis clock went back, is
-- not shortened). Where a key's first lease has not run out, no lease
-- there has, so every worker still in the key is live, and the ZADD (XX GT
-- CH: no worker added, no lease shortened) says by its count whether all
-- of them were: for the registry that first lease comes from the one
-- ZRANGE of its first two, read before the renewals, that also tells the
-- reclaimer the next lease to run out (the renewals only move leases
-- later, so the two are still the first unless one of them was renewed
-- with another worker); a queue key renewing several workers takes a
-- ZRANGE of its own. One ZRANGE and one ZADD for a hundred workers, where
-- a ZSCORE each cost a shared client's renewal of 1,000 idle workers most
-- of its Redis time (not ZMSCORE: a restricted ACL user of a fleet without
-- groups, see docs/security.md, may not be granted it). A key with a lease
-- run out, or a worker missing, is asked worker by worker. For one worker
-- serving one queue, while nobody has expired, six calls in all: TIME,
-- the ZRANGE, ZADD and ZCOUNT of the registry, a ZSCORE and a ZADD of the
-- queue's leases (each a few µs of Redis, near a tenth of what such a
-- renewal costs it, the request's own cost included); while some have expired,
-- five more at most (the claims counted, one look past them at the
-- expired, and the next live leases), however many have expired or are
-- claimed.
local workers_key, reclaiming_key = KEYS[1], KEYS[2]
local ttl = tonumber(ARGV[1]) -- ms
-- Then per worker, ARGV[2...] its id and how many of KEYS[3...] are its
-- queues' leases, which follow in the same order.

local now = now_ms()
local expiry = ms(now + ttl)
local out = {now, 0, '', 0, 0, 0}

-- Renew, in key, the leases of workers ws, writing each one's result (1
-- renewed, -1 gone) to out at the index at gives. live, if known, tells
-- whether no lease in key has run out.
local function renew(key, ws, at, live)
  local n = #ws
  if live == nil and n > 1 then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    live = not first[2] or tonumber(first[2]) > now
  end
  if live then
    local args = {}
    for i, w in ipairs(ws) do
      args[2 * i - 1], args[2 * i] = expiry, w
    end
    local all = redis.call('ZADD', key, 'XX', 'GT', 'CH', unpack(args)) == n
    for i, w in ipairs(ws) do
      -- A worker left out of the count was missing, or held this
      -- expiry already (renewed within the same millisecond) or a later
      -- one (a clock that went back): present is live.
      out[at[i]] = (all or redis.call('ZSCORE', key, w)) and 1 or -1
    end
    return
  end
  local args = {}
  for i, w in ipairs(ws) do
    if lease_live(key, w, now) then
      args[#args + 1], args[#args + 2] = expiry, w
      out[at[i]] = 1
    else
      out[at[i]] = -1
    end
  end
  if #args > 0 then
    redis.call('ZADD', key, 'GT', unpack(args))
  end
end

-- The registry first: a worker whose registry lease is gone has its
-- queue leases left alone (0). Then each queue lease key, once, with the
-- workers that renew there, in the order they first appear.
local ws, at, qs = {}, {}, {}
local k = 3
for i = 2, #ARGV, 2 do -- the tails of ARGV and KEYS
  out[#out + 1] = 0
  ws[#ws + 1], at[#at + 1] = ARGV[i], #out
  local n = tonumber(ARGV[i + 1])
  for j = k, k + n - 1 do
    out[#out + 1] = 0
    qs[#qs + 1] = {KEYS[j], #out, #at} -- the key, its result's index, the worker's
  end
  k = k + n
end
local front = redis.call('ZRANGE', workers_key, 0, 1, 'WITHSCORES')
local live = not front[2] or tonumber(front[2]) > now
renew(workers_key, ws, at, live)
local groups, keys = {}, {}
for _, q in ipairs(qs) do
  local key, pos, owner = q[1], q[2], q[3]
  if out[at[owner]] > 0 then
    local g = groups[key]
    if not g then
      g = {{}, {}}
      groups[key], keys[#keys + 1] = g, key
    end
    g[1][#g[1] + 1], g[2][#g[2] + 1] = ws[owner], pos
  end
end
for _, key in ipairs(keys) do
  renew(key, groups[key][1], groups[key][2])
end

-- One worker alone needs no second look: if it was the first, the next
-- lease to run out is the second's, as read; otherwise the first's. Of
-- several, one that was among the first two has moved.
local unclaimed = 0
for _, w in ipairs(#ws > 1 and ws or {}) do
  if w == front[1] or w == front[3] then
    live = false
  end
end
if not live then
  local found, _, n = registry_front(workers_key, reclaiming_key, nil, now, 0)
  front, unclaimed = found, n
end
if unclaimed > 0 then
  out[2] = 1
end
if front[1] then
  out[3], out[4] = front[1], tonumber(front[2])
end
if front[3] then
  out[5] = tonumber(front[4])
end
out[6] = redis.call('ZCOUNT', workers_key, '(' .. ms(now), '+inf')
return out
