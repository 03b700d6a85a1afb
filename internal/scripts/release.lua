-- Return one worker's processes in one queue to the FRONT of the queue, in
-- the order they were dequeued, then drop the worker's lease and wake the
-- queue. Only that worker's processes move: every other worker's stay put.
--
-- Used by peers to reclaim a dead worker (mode "expired": refuses while the
-- lease is still live) and by a worker giving its own work back (mode
-- "force": StopWork, Fail, Close). Processes listed after the mode are kept
-- (a worker reconciling after a lost reply keeps what it knows it holds).
-- Cancelled processes and those of a deleted queue are dropped, not requeued.
-- A reclaim (mode "expired") also runs the poison-pill guard (see
-- return_to_front): a task whose holders died soon after starting it
-- poison limit times goes to the dead letters, kind 'poison', rather than
-- kill worker after worker. A limit of 0 turns the guard off; a window of 0
-- leaves the count alone.
-- KEYS: waiting, procs, leases, meta, idle, errors, dead, unique, results,
--       retained, high, low, progress, stats
-- ARGV: worker, channel, mode ("expired" | "force" | "orphans"), poison
--       limit, poison window (ms), dead letters' max count, their max age
--       (ms), keep pid...
-- Returns -1 - left if mode is "expired" and the lease is live (left: the
-- ms it has left, so the reclaimer can come back then), else {the tasks
-- returned, the last process id given in the queue (a number; "0" if
-- none)}: a worker that gave its own processes back ignores a hand-off
-- event (see enqueue.lua) for a process up to that id that reaches it
-- later, since the process went back with the others.
set_lists(KEYS[1], KEYS[11], KEYS[12])
local worker = ARGV[1]
local mode = ARGV[3]
if mode == 'expired' then
  local now = now_ms()
  local score = redis.call('ZSCORE', KEYS[3], worker)
  if score and tonumber(score) > now then
    return -1 - (tonumber(score) - now)
  end
end
local keep = {}
for i = 8, #ARGV do keep[ARGV[i]] = true end

local mine = {}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if proc_owner(v) == worker and not keep[pid] then
    mine[#mine + 1] = {pid = pid, v = v}
  end
end
-- With a window, every mode clears the count of deaths of a task held
-- longer than it (a persistent task given back at a shutdown or a fence
-- was healthy); only a reclaim counts one.
local poison
if tonumber(ARGV[5]) > 0 then
  local now = now_ms()
  poison = {now = now, window = tonumber(ARGV[5]), limit = tonumber(ARGV[4]),
    count = mode == 'expired' and tonumber(ARGV[4]) > 0}
  poison.bury = function(entry, holder, deaths, pid)
    local why = 'its holder died soon after starting it, ' .. deaths .. ' times'
    retain(KEYS[9], KEYS[10], ARGV[2], entry, 'dead', pid, 0, why, 'poison')
    local h, payload = entry_split(entry)
    h = header_set(header_set(header_set(h, 'D', ms(now)), 'W', holder), 'K', 'poison')
    redis.call('ZADD', KEYS[7], ms(now), h .. ':' .. payload)
    redis.call('HSET', KEYS[6], entry_id(entry), 'its holder died soon after starting it, ' .. deaths .. ' times')
    trim_dead(KEYS[7], KEYS[6], tonumber(ARGV[6]), now - tonumber(ARGV[7]))
    stat('d', 1)
  end
end
local upto = redis.call('HGET', KEYS[4], 'seq') or '0'
local returned, _, freed = return_to_front(KEYS[1], KEYS[2], KEYS[4], KEYS[6], KEYS[8], KEYS[13], mine, poison)
drop_meta_if_gone(KEYS[2], KEYS[4])
-- A peer reclaims a dead worker's tasks; a worker giving its own back
-- (force, or orphans: those whose dequeue reply it lost) requeues them.
stat(mode == 'expired' and 'k' or 'q', returned)
stats_flush(KEYS[14])
if mode ~= 'orphans' then
  redis.call('ZREM', KEYS[3], worker)
  redis.call('ZREM', KEYS[5], worker)
end
if returned > 0 then
  publish(ARGV[2], 'w' .. returned)
elseif mode == 'orphans' then
  -- Dropped processes free slots under a concurrency limit.
  slots_freed(KEYS[4], KEYS[1], KEYS[5], ARGV[2], freed)
else
  -- The worker may have been named in a work event it never acted on: it
  -- died parked in the idle set, or stopped listening before it left it.
  -- Wake everyone if tasks wait.
  local waiting = waiting_len(KEYS[1])
  if waiting > 0 then
    publish(ARGV[2], 'w' .. waiting)
  end
end
return {returned, upto}
