-- Enqueue tasks at the back of a queue (or, with front set, at its front)
-- and wake its workers; or, when they are due later, into the queue's
-- delayed set. Each task gets an id (see next_task_ids) and is stored as
-- an entry '<id><fields>:<payload>'.
--
-- With a unique key (its sha1; one task only) the task is added only if no
-- task holds the key: while alive (ttl 0: the key is given up when the
-- task ends, finished, dead or cancelled) or for ttl ms from now. If one
-- does, nothing is added and its id is returned, flagged duplicate.
-- KEYS: waiting, meta, idle, delayed, unique, unique TTLs, stats
-- ARGV: channel, queue name, front ("1" | "0"), due (µs, Redis clock; 0:
--       now), delay (µs from now; 0: none), header fields every task gets
--       (',m<budget>,t<timeout ms>', or ''), unique key's sha1 (or ''),
--       unique ttl (ms; 0: while alive), payload...
-- Returns {unregistered, first id (hex), duplicate (0/1)}: unregistered is
-- 1 while the queue is not yet confirmed in the registry (see
-- registered.lua), and the caller then registers it; the tasks' ids count
-- up by one from the first.
--
-- The work event names the handler runtimes that should wake: up to n + 1
-- of those parked in the idle set (see dequeue.lua), longest idle first,
-- one more than the tasks in case one of them has just died. Every other
-- runtime is busy and will come back for more by itself, so it need not
-- hear of the tasks. With none parked the event names nobody and wakes all.
-- Delayed tasks raise a schedule event 's<due>' instead, which every worker
-- serving the queue uses to arm its timer (see promote.lua).
local n = #ARGV - 8
local header = ARGV[6]
local sha = ARGV[7]
if sha ~= '' then
  -- Keys held for a time are dropped once it has passed (a hundred a call).
  local stale = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', ms(now_ms()), 'LIMIT', 0, 100)
  if #stale > 0 then
    redis.call('HDEL', KEYS[5], unpack(stale))
    redis.call('ZREM', KEYS[6], unpack(stale))
  end
  local exp = redis.call('ZSCORE', KEYS[6], sha)
  if exp and tonumber(exp) <= now_ms() then
    redis.call('HDEL', KEYS[5], sha)
    redis.call('ZREM', KEYS[6], sha)
  end
  local holder = redis.call('HGET', KEYS[5], sha)
  if holder then
    return {0, holder, 1}
  end
end
local first = next_task_ids(KEYS[2], n)
if sha ~= '' then
  redis.call('HSET', KEYS[5], sha, string.format('%x', first))
  local ttl = tonumber(ARGV[8])
  if ttl > 0 then
    redis.call('ZADD', KEYS[6], ms(now_ms() + ttl), sha)
  else
    header = header .. ',u' .. sha
  end
end
-- Due times are kept in µs (exact in a score until the year 2255).
local now = now_us()
local due = math.max(tonumber(ARGV[4]), now + tonumber(ARGV[5]))
local entries = {}
if due > now then
  -- A delayed task's wait starts when it is due (see entry_due).
  header = header .. ',d' .. string.format('%x', due)
  for i = 1, n do
    entries[#entries + 1] = ms(due)
    entries[#entries + 1] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[8 + i]
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
      entries[#entries + 1] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[8 + i]
    end
    for i = 1, #entries, 1000 do
      redis.call('RPUSH', KEYS[1], unpack(entries, i, math.min(i + 999, #entries)))
    end
  else
    for i = 1, n do
      entries[i] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[8 + i]
    end
    redis.call('LPUSH', KEYS[1], unpack(entries))
  end
  wake(KEYS[3], ARGV[1], n)
end
local id = string.format('%x', first)
stat('e', n)
stats_flush(KEYS[7])
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if redis.call('HEXISTS', KEYS[2], 'registered') == 1 then
  return {0, id, 0}
end
name_queue(KEYS[2], ARGV[2])
return {1, id, 0}
