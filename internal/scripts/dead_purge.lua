-- Delete every dead letter of a queue and their errors. The errors hash
-- also holds the errors of tasks waiting for a retry, so only the dead
-- letters' fields go, 1,000 at a time.
-- Returns the number of dead letters deleted.
local dead_key, errors_key = KEYS[1], KEYS[2]

local n = redis.call('ZCARD', dead_key)
for i = 0, n - 1, 1000 do
  local chunk = redis.call('ZRANGE', dead_key, i, i + 999)
  local ids = {}
  for j, e in ipairs(chunk) do
    ids[j] = entry_id(e)
  end
  if #ids > 0 then
    errors_drop(errors_key, ids)
  end
end
redis.call('DEL', dead_key)
return n
