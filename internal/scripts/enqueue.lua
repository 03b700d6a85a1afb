-- Enqueue tasks at the back of a queue and wake its workers.
-- KEYS: waiting, meta, idle
-- ARGV: channel, queue name, task...
-- Returns 1 while the queue is not yet confirmed in the registry (see
-- registered.lua): the caller then registers it.
--
-- The work event names the handler runtimes that should wake: up to n + 1
-- of those parked in the idle set (see dequeue.lua), longest idle first,
-- one more than the tasks in case one of them has just died. Every other
-- runtime is busy and will come back for more by itself, so it need not
-- hear of the tasks. With none parked the event names nobody and wakes all.
local n = #ARGV - 2
redis.call('LPUSH', KEYS[1], unpack(ARGV, 3))
local parked = redis.call('ZPOPMIN', KEYS[3], n + 1)
local msg = 'w' .. n
if #parked > 0 then
  local ids = {}
  for i = 1, #parked, 2 do
    ids[#ids + 1] = parked[i]
  end
  msg = msg .. ':' .. table.concat(ids, ',')
end
publish(ARGV[1], msg)
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if redis.call('HEXISTS', KEYS[2], 'registered') == 1 then
  return 0
end
redis.call('HSETNX', KEYS[2], 'name', ARGV[2])
return 1
