-- Delete one dead letter and its error.
-- KEYS: dead, errors
-- ARGV: task id, ZSCAN pattern for the id (see find_dead)
-- Returns 1 when deleted, 0 when there was no such dead letter.
local e = find_dead(KEYS[1], ARGV[1], ARGV[2])
if not e then
  return 0
end
redis.call('ZREM', KEYS[1], e)
redis.call('HDEL', KEYS[2], ARGV[1])
return 1
