-- Read what carrying workflow notices needs, in the queue's slot, for
-- several at once (a batch of carries): when each notice was written
-- (µs), or '' if it is gone (carried already), and the outcome record of
-- its task, or '' if none is kept.
-- Returns {when, record} per notice, in ARGV's order.
local flows_key, results_key = KEYS[1], KEYS[2]
-- ARGV: notice, task id, ... per notice.

-- Each notice's score is read on its own (ZMSCORE is not among the
-- commands a restricted user needs for workflows, docs/security.md); the
-- records of those found, a thousand a call.
local out, found, ids = {}, {}, {}
for i = 1, #ARGV, 2 do
  local at = redis.call('ZSCORE', flows_key, ARGV[i])
  out[#out + 1] = at and ms(tonumber(at)) or ''
  out[#out + 1] = ''
  if at then
    found[#found + 1] = #out
    ids[#ids + 1] = ARGV[i + 1]
  end
end
for i = 1, #ids, 1000 do
  local recs = redis.call('HMGET', results_key, unpack(ids, i, math.min(i + 999, #ids)))
  for j = 1, #recs do
    out[found[i + j - 1]] = recs[j] or ''
  end
end
return out
