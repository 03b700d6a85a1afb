-- Look, for Client.Check, for workflow steps' tasks that are gone from
-- their queue though they have not ended: listed as pending in the
-- retained set (every workflow task is retained, and ends unlisted or
-- with its outcome) but in no place a task lives (see tasks_search in
-- common/find.lua).
-- Changes nothing. The search is bounded (limit entries, budget bytes):
-- a search that stopped at a bound confirms none.
-- Returns {partial (0/1), then per id given 1 (gone) or 0}.
local procs_key, delayed_key, dead_key, high_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiting_key, low_key, gwait_key, gather_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local retained_key = KEYS[9]
local limit, budget = tonumber(ARGV[1]), tonumber(ARGV[2]) -- budget in bytes
-- Then the tasks' ids, ARGV[3...].

local want, pending = {}, {}
for i = 3, #ARGV do
  local score = redis.call('ZSCORE', retained_key, ARGV[i])
  if score == 'inf' or score == '+inf' then
    want[ARGV[i]] = true
    pending[i] = true
  end
end
local found, partial = tasks_search(procs_key, delayed_key, dead_key, high_key, waiting_key, low_key, gwait_key, gather_key,
  want, limit, budget)
local out = {partial and 1 or 0}
for i = 3, #ARGV do
  out[#out + 1] = (not partial and pending[i] and not found[ARGV[i]]) and 1 or 0
end
return out
