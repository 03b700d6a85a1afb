-- Delete every dead letter of a queue and their errors. The errors hash
-- also holds the errors of tasks waiting for a retry, so only the dead
-- letters' fields go, 1,000 at a time.
-- KEYS: dead, errors
-- Returns the number of dead letters deleted.
local n = redis.call('ZCARD', KEYS[1])
for i = 0, n - 1, 1000 do
  local chunk = redis.call('ZRANGE', KEYS[1], i, i + 999)
  local ids = {}
  for j, e in ipairs(chunk) do
    ids[j] = entry_id(e)
  end
  if #ids > 0 then
    redis.call('HDEL', KEYS[2], unpack(ids))
  end
end
redis.call('DEL', KEYS[1])
return n
