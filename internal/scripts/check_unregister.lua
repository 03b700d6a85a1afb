-- Run by Client.Check after it removed a queue from the registry because
-- nothing was behind the entry: report whether the queue exists after all
-- (created meanwhile; the caller then registers it again), and clear its
-- confirmation so that, should the caller not get that far, the next
-- enqueue registers it.
-- Returns 1 if the queue exists.
local meta_key = KEYS[1]

if redis.call('HEXISTS', meta_key, 'name') == 0 then
  return 0
end
redis.call('HDEL', meta_key, 'registered')
return 1
