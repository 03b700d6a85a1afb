-- Record the slots a live worker's handlers have in each queue it handles
-- (see WorkerSlots in records.go), written as Handle starts or StopWork
-- ends one, never per renewal; an empty record removes the worker's.
-- Nothing is written for a worker whose lease is gone: its deregistration
-- (deregister.lua) removes the record with its info.
-- Returns 1 when written, -1 when the lease was gone.
local workers_key, slots_key = KEYS[1], KEYS[2] -- the registry, the workers' slots
local worker, record = ARGV[1], ARGV[2] -- record: '' for none

if not lease_live(workers_key, worker, now_ms()) then
  return -1
end
if record == '' then
  redis.call('HDEL', slots_key, worker)
else
  redis.call('HSET', slots_key, worker, record)
end
return 1
