-- Drop, for Client.Check, the pending mark of a workflow step's task that
-- was gone from its queue and whose step was enqueued anew
-- (check_step_requeue.lua) and given the new task's id in its workflow:
-- no outcome will come for it. Only while the step's unique key has
-- another holder, the new task, and the mark is still pending.
-- Returns 1 if it dropped the mark, else 0.
local retained_key, unique_key = KEYS[1], KEYS[2]
local old, sha = ARGV[1], ARGV[2] -- the gone task's id; the step's unique key's sha1

local holder = redis.call('HGET', unique_key, sha)
local score = redis.call('ZSCORE', retained_key, old)
if holder and holder ~= old and (score == 'inf' or score == '+inf') then
  return redis.call('ZREM', retained_key, old)
end
return 0
