-- Confirm that a queue was added to the registry, so enqueues stop asking
-- for it. Only a queue that still exists is confirmed: if it was deleted in
-- between, the next enqueue registers it again.
-- KEYS: meta
-- Returns 1 when confirmed.
if redis.call('HEXISTS', KEYS[1], 'name') == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'registered', 1)
return 1
