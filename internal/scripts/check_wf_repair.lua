-- Repair one workflow for Client.Check, judging again when it runs: a
-- workflow whose flow hash is gone has its other keys deleted (leftovers
-- of a partial expiry, an eviction or a hand delete: nothing reads them
-- without the flow hash, and a workflow created under the id since has
-- its flow hash, so is left alone); an ended workflow's keys that do not
-- expire are set to expire when its flow hash does, or, if that does not
-- expire either, once its keep has passed since it ended (at once if it
-- has). A running workflow is left alone.
-- Returns {'deleted' | 'expiring' | '', keys changed}.
local flow_key, steps_key, ids_key, left_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local kids_key, parents_key, spec_key, results_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local freed_key, seen_key, order_key = KEYS[9], KEYS[10], KEYS[11]

if redis.call('EXISTS', flow_key) == 0 then
  local n = 0
  for _, k in ipairs(KEYS) do
    n = n + redis.call('DEL', k)
  end
  return {n > 0 and 'deleted' or '', n}
end
local state = redis.call('HGET', flow_key, 'state')
if state ~= 'succeeded' and state ~= 'failed' and state ~= 'cancelled' then
  return {'', 0}
end
local ttl = redis.call('PTTL', flow_key)
if ttl < 0 then
  local flow = redis.call('HMGET', flow_key, 'keep', 'ended')
  local keep = tonumber(flow[1]) or 0
  local ended = tonumber(flow[2]) or now_ms()
  ttl = ended + keep - now_ms()
end
ttl = math.max(ttl, 1)
local n = 0
for _, k in ipairs(KEYS) do
  if redis.call('PTTL', k) == -1 then
    redis.call('PEXPIRE', k, ttl)
    n = n + 1
  end
end
return {n > 0 and 'expiring' or '', n}
