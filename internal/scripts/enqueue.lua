-- Enqueue tasks at the back of a queue (or, with front set, at its front)
-- and wake its workers; or, when they are due later, into the queue's
-- delayed set. Each task gets an id (as next_task_ids gives them) and is
-- stored as an entry '<id><fields>:<payload>'.
--
-- With a unique key (its sha1; one task only) the task is added only if no
-- task holds the key: while alive (ttl 0: the key is given up when the
-- task ends, finished, dead or cancelled) or for ttl ms from now. If one
-- does, nothing is added and its id is returned, flagged duplicate (the
-- client's counts it carries are written all the same).
-- KEYS: waiting (the tasks' level's list), meta, idle, delayed, unique,
--       unique TTLs, stats, leases, procs, the normal, high and low
--       lists, and retained
-- ARGV: channel, queue name, front ("1" | "0"), due (µs, Redis clock; 0:
--       now), delay (µs from now; 0: none), header fields every task gets
--       (',m<budget>,t<timeout ms>', or ''), unique key's sha1 (or ''),
--       unique ttl (ms; 0: while alive), hand-off ("1": the task may be
--       handed to an idle runtime, see below; "0"), the client's stats
--       counts (see stats_add; its own count of enqueued tasks among
--       them: this script counts none), payload...
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
--
-- A hand-off saves the named runtime its dequeue, a round trip: a single
-- task (the caller allows it only for one small enough to go in an event
-- every subscriber of the channel hears) due now, on a queue where nothing
-- waits, that no control holds back (paused, a concurrency or rate limit:
-- those are the dequeue's to apply), goes straight into a process of the
-- longest-idle runtime, as a dequeue of its own would have made it, if
-- that runtime's worker has a live lease on the queue. The runtime leaves
-- the idle set (its next dequeue parks it again) and the event
-- 'h<worker>,<pid>,<entry>' carries the process to it. It starts the task,
-- or gives it back to the front if it cannot (stop.lua); if its worker dies
-- first, its lease covers the process as it covers every other.
local n = #ARGV - 10
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
    -- Nothing is added, but the counts this call carries are written
    -- (the client takes them as written once the script ran).
    stats_client(KEYS[7], KEYS[2], ARGV[10])
    return {0, holder, 1}
  end
end
-- Due times are kept in µs (exact in a score until the year 2255).
local now = now_us()
-- The queue's meta hash is read once, and written once at the end (sets):
-- the task id counter (see next_task_ids), whether the queue is confirmed,
-- the controls a hand-off must not pass (see queue_controls) and the
-- process id counter a hand-off counts on (see start_procs). On an idle
-- queue the script's cost is mostly its number of calls.
local meta = redis.call('HMGET', KEYS[2], 'tid', 'registered', 'paused', 'limit', 'rate', 'seq')
local first = math.max(now, (tonumber(meta[1] or '0') or 0) + 1)
local sets = {'tid', ms(first + n - 1)}
-- Hand entry to worker, the longest-idle runtime, just taken out of the
-- idle set (see above); false when it cannot go. The checks go cheapest
-- first for a busy queue (tasks wait), then for one held back (controls).
local function hand_off(entry, worker)
  if redis.call('EXISTS', KEYS[10], KEYS[11], KEYS[12]) > 0 then
    return false
  end
  if meta[3] or meta[4] or meta[5] or not lease_live(KEYS[8], worker, math.floor(now / 1000)) then
    return false
  end
  local pids = start_procs(KEYS[9], KEYS[2], worker, {entry}, now, meta[6], sets)
  publish(ARGV[1], 'h' .. worker .. ',' .. pids[1] .. ',' .. entry)
  return true
end
if sha ~= '' then
  redis.call('HSET', KEYS[5], sha, string.format('%x', first))
  local ttl = tonumber(ARGV[8])
  if ttl > 0 then
    redis.call('ZADD', KEYS[6], ms(now_ms() + ttl), sha)
  else
    header = header .. ',u' .. sha
  end
end
-- Retained tasks are listed as pending an outcome (see outcome_pending).
if string.find(ARGV[6], ',R', 1, true) then
  local ids = {}
  for i = 1, n do
    ids[i] = string.format('%x', first + i - 1)
  end
  outcome_pending(KEYS[13], ids)
end
local due = math.max(tonumber(ARGV[4]), now + tonumber(ARGV[5]))
local entries = {}
if due > now then
  -- A delayed task's wait starts when it is due (see entry_due).
  header = header .. ',d' .. string.format('%x', due)
  for i = 1, n do
    entries[#entries + 1] = ms(due)
    entries[#entries + 1] = string.format('%x', first + i - 1) .. header .. ':' .. ARGV[10 + i]
  end
  for i = 1, #entries, 1000 do
    redis.call('ZADD', KEYS[4], unpack(entries, i, math.min(i + 999, #entries)))
  end
  publish(ARGV[1], 's' .. ms(due))
else
  -- The front is the right end: a batch for the front is listed last task
  -- first, so it comes out in its own order.
  local front = ARGV[3] == '1'
  for i = 1, n do
    local k = front and n - i + 1 or i
    entries[i] = string.format('%x', first + k - 1) .. header .. ':' .. ARGV[10 + k]
  end
  -- A single task takes the longest-idle runtime out of the idle set
  -- first, as the wake would: with none parked (a busy queue) that is all
  -- the hand-off costs.
  local popped
  if ARGV[9] == '1' and n == 1 then
    popped = redis.call('ZPOPMIN', KEYS[3])
  end
  if not (popped and popped[1] and hand_off(entries[1], popped[1])) then
    if front then
      -- A batch at the front comes in one call, however large, so it
      -- pushes in slices.
      for i = 1, n, 1000 do
        redis.call('RPUSH', KEYS[1], unpack(entries, i, math.min(i + 999, n)))
      end
    else
      redis.call('LPUSH', KEYS[1], unpack(entries))
    end
    wake(KEYS[3], ARGV[1], n, popped)
  end
end
redis.call('HSET', KEYS[2], unpack(sets))
local id = string.format('%x', first)
-- The client counts what it enqueued (internal/store/statsbuf.go) and
-- carries its counts about once a second: the usual call writes no stats.
stats_add(ARGV[10])
stats_flush(KEYS[7], math.floor(now / 1000))
-- A confirmed queue has its name (delete.lua removes both together), so
-- the usual enqueue stops here.
if meta[2] then
  return {0, id, 0}
end
name_queue(KEYS[2], ARGV[2])
return {1, id, 0}
