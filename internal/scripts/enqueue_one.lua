-- Enqueue one plain task: enqueue.lua for a single task due now, with no
-- unique key, group, aggregation key, retained outcome or workflow step
-- (the caller, internal/store's enqueueCall, sends such a task here and
-- every other call to enqueue.lua). It does for that task all that enqueue.lua does:
-- the id as next_task_ids gives it, the entry '<id><fields>:<payload>' at
-- the back of its level's list (or its front), the work event naming the
-- parked runtimes, or the hand-off to the longest-idle one, the client's
-- stats counts, and the queue named when it is not yet confirmed. It
-- carries none of the rest of enqueue.lua, nor the helpers that rest
-- uses: a script runs its whole text, helpers included, on every call.
-- Returns enqueue.lua's reply with no duplicates: {unregistered, id
-- (hex), 0}.
--
-- The hand-off (hand_off, common/processes.lua) is every enqueue's, and
-- the wake enqueue.lua's: see there.
local list_key, meta_key, idle_key, stats_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4] -- list: the task's level's
local leases_key, procs_key = KEYS[5], KEYS[6]
-- Where tasks wait (every level's list, and the groups ready to start): a
-- hand-off must not pass them.
local waiting_key, high_key, low_key, gready_key = KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local channel, queue, front = ARGV[1], ARGV[2], ARGV[3] == '1' -- queue: its name; front: "1" | "0"
local fields = ARGV[4] -- the task's header fields past its id ('' for none; see records.go)
local hand = ARGV[5] -- "1": the task may be handed to an idle runtime; "0"
local counts = ARGV[6] -- the client's stats counts (see stats_add)
local payload = ARGV[7]

local now = now_us()
-- The meta hash read once and written once, as in enqueue.lua.
local meta = redis.call('HMGET', meta_key, 'tid', 'registered', 'paused', 'limit', 'rate', 'seq')
local n = math.max(now, (tonumber(meta[1] or '0') or 0) + 1)
local id = string.format('%x', n)
local entry = id .. fields .. ':' .. payload
local sets = {'tid', ms(n)}
local popped
if hand == '1' then
  popped = redis.call('ZPOPMIN', idle_key)
end
if not (popped and popped[1] and hand_off(channel, procs_key, meta_key, leases_key, waiting_key, high_key, low_key, gready_key,
    meta, popped[1], entry, now, sets)) then
  -- The front is the right end.
  redis.call(front and 'RPUSH' or 'LPUSH', list_key, entry)
  wake(idle_key, channel, 1, popped)
end
redis.call('HSET', meta_key, unpack(sets))
stats_add(counts)
stats_flush(stats_key, math.floor(now / 1000))
-- A confirmed queue has its name (delete.lua removes both together).
if meta[2] then
  return {0, id, 0}
end
name_queue(meta_key, queue)
return {1, id, 0}
