-- Remove workflow notices their workflows have recorded (wf_release.lua)
-- and whose freed steps are queued.
-- Returns the number removed.
local flows_key = KEYS[1]
-- ARGV: the notices.

return redis.call('ZREM', flows_key, unpack(ARGV))
