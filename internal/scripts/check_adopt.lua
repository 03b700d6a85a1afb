-- Make the registry cover a worker that holds work the registry does not
-- know of, so that reclaim finds it: a worker missing from the registry is
-- entered as dead (lease expiry 0; a live worker in that state finds its
-- lease gone at its next renewal and fences itself, as it would anyway),
-- and the queues where it holds a lease or a process join its queue set.
-- A registered worker keeps its lease as it is.
-- Returns 1 if the worker was entered in the registry, else 0.
local workers_key, worker_queues_key = KEYS[1], KEYS[2] -- the registry, the worker's queue set
local worker = ARGV[1] -- then ARGV[2...]: the queues where it holds a lease or a process

local entered = 0
if not redis.call('ZSCORE', workers_key, worker) then
  redis.call('ZADD', workers_key, 0, worker)
  entered = 1
end
-- The queues: the tail of ARGV.
if #ARGV > 1 then
  redis.call('SADD', worker_queues_key, unpack(ARGV, 2))
end
return entered
