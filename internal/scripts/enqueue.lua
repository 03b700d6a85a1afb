-- Enqueue tasks at the back of a queue (or, with front set, at its front)
-- and wake its workers; or, when they are due later, into the queue's
-- delayed set. Each task gets an id (see next_task_ids) and is stored as
-- an entry '<id><fields>:<payload>'.
-- KEYS: waiting, meta, idle, delayed
-- ARGV: channel, queue name, front ("1" | "0"), due (µs, Redis clock; 0:
--       now), delay (µs from now; 0: none), header fields every task gets
--       (',m<budget>,t<timeout ms>', or ''), payload...
-- Returns {unregistered, first id (hex)}: unregistered is 1 while the queue
-- is not yet confirmed in the registry (see registered.lua), and the caller
-- then registers it; the tasks' ids count up by one from the first.
--
-- The work event names the handler runtimes that should wake: up to n + 1
-- of those parked in the idle set (see dequeue.lua), longest idle first,
-- one more than the tasks in case one of them has just died. Every other
-- runtime is busy and will come back for more by itself, so it need not
-- hear of the tasks. With none parked the event names nobody and wakes all.
-- Delayed tasks raise a schedule event 's<due>' instead, which every worker
-- serving the queue uses to arm its timer (see promote.lua).
local n = #ARGV - 6
local first = next_task_ids(KEYS[2], n)
local header = ARGV[6]
-- Due times are kept in whole ms, rounded up, and promote.lua compares
-- them with the clock rounded down: a task is never moved early.
local now = now_us()
local due_us = math.max(tonumber(ARGV[4]), now + tonumber(ARGV[5]))
local due = math.ceil(due_us / 1000)
local entries = {}
if due_us > now then
  for i = 1, n do
    entries[#entries + 1] = ms(due)
    entries[#entries + 1] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[6 + i]
  end
  for i = 1, #entries, 1000 do
    redis.call('ZADD', KEYS[4], unpack(entries, i, math.min(i + 999, #entries)))
  end
  publish(ARGV[1], 's' .. ms(due))
else
  if ARGV[3] == '1' then
    -- The front is the right end: push the last task first, so the batch
    -- comes out in its own order. A batch at the front comes in one call,
    -- however large, so it pushes in slices.
    for i = n, 1, -1 do
      entries[#entries + 1] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[6 + i]
    end
    for i = 1, #entries, 1000 do
      redis.call('RPUSH', KEYS[1], unpack(entries, i, math.min(i + 999, #entries)))
    end
  else
    for i = 1, n do
      entries[i] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[6 + i]
    end
    redis.call('LPUSH', KEYS[1], unpack(entries))
  end
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
end
local id = string.format('%x', first)
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if redis.call('HEXISTS', KEYS[2], 'registered') == 1 then
  return {0, id}
end
name_queue(KEYS[2], ARGV[2])
return {1, id}
