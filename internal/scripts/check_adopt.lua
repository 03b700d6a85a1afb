-- Make the registry cover a worker that holds work the registry does not
-- know of, so that reclaim finds it: a worker missing from the registry is
-- entered as dead (lease expiry 0; a live worker in that state finds its
-- lease gone at its next renewal and fences itself, as it would anyway),
-- and the queues where it holds a lease or a process join its queue set.
-- A registered worker keeps its lease as it is.
-- KEYS: workers, worker's queue set
-- ARGV: worker, queue...
-- Returns 1 if the worker was entered in the registry, else 0.
local entered = 0
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], 0, ARGV[1])
  entered = 1
end
if #ARGV > 1 then
  redis.call('SADD', KEYS[2], unpack(ARGV, 2))
end
return entered
