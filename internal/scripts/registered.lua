-- Confirm that a queue was added to the registry, so enqueues stop asking
-- for it. Only a queue that still exists is confirmed: if it was deleted in
-- between, the next enqueue registers it again.
-- Returns 1 when confirmed.
local meta_key = KEYS[1]

if redis.call('HEXISTS', meta_key, 'name') == 0 then
  return 0
end
redis.call('HSET', meta_key, 'registered', 1)
return 1
