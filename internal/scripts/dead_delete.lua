-- Delete one dead letter and its error.
-- Returns 1 when deleted, 0 when there was no such dead letter.
local dead_key, errors_key = KEYS[1], KEYS[2]
local id, pattern = ARGV[1], ARGV[2] -- the task's id, and the ZSCAN pattern for it (see find_dead)

local e = find_dead(dead_key, id, pattern)
if not e then
  return 0
end
redis.call('ZREM', dead_key, e)
errors_drop(errors_key, {id})
return 1
