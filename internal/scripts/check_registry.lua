-- Read the registries for Client.Check, and judge candidate workers in the
-- same instant: whether each is registered, whether its queue set exists,
-- and which of the given queues (where it holds a lease or a process) its
-- set does not list.
-- Returns {{queue, ...}, {worker, ms left (negative once expired), ...},
--          {{registered (0/1), set exists (0/1), {missing queue, ...}}, ...}}.
local workers_key, queues_key = KEYS[1], KEYS[2] -- the registries of workers and of queues
-- Then per candidate worker, KEYS[3...] its queue set and in ARGV, in the
-- same order, its id, a count n and n queue names.

local now = now_ms()
local workers = {}
local all = redis.call('ZRANGE', workers_key, 0, -1, 'WITHSCORES')
for i = 1, #all, 2 do
  workers[#workers + 1] = all[i]
  workers[#workers + 1] = tonumber(all[i + 1]) - now
end
local judged = {}
local a = 1 -- where the candidate's values start in ARGV
for k = 3, #KEYS do -- the tails of KEYS and ARGV, candidate by candidate
  local id, n = ARGV[a], tonumber(ARGV[a + 1])
  local registered = redis.call('ZSCORE', workers_key, id) and 1 or 0
  local missing = {}
  for j = a + 2, a + 1 + n do
    if redis.call('SISMEMBER', KEYS[k], ARGV[j]) == 0 then
      missing[#missing + 1] = ARGV[j]
    end
  end
  judged[#judged + 1] = {registered, redis.call('EXISTS', KEYS[k]), missing}
  a = a + 2 + n
end
return {redis.call('SMEMBERS', queues_key), workers, judged}
