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
-- Returns -1 - left if mode is "expired" and the lease is live (left: the
-- ms it has left, so the reclaimer can come back then), else {the tasks
-- returned, the last process id given in the queue (a number; "0" if
-- none), the tasks dropped (cancelled, or of a deleted queue), then the
-- ids of the tasks buried as poison}: a worker that gave its own processes
-- back ignores a hand-off event (see enqueue.lua) for a process up to that
-- id that reaches it later, since the process went back with the others.
local waiting_key, procs_key, leases_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local idle_key, errors_key, dead_key, unique_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local results_key, retained_key, high_key, low_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local progress_key, stats_key = KEYS[13], KEYS[14]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[15], KEYS[16], KEYS[17], KEYS[18] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[19] -- workflow tasks' notices (see flow_notice)
local worker, channel, mode = ARGV[1], ARGV[2], ARGV[3] -- mode: expired | force | orphans
local poison_limit, poison_window = tonumber(ARGV[4]), tonumber(ARGV[5]) -- window in ms
local dead_max, dead_age = tonumber(ARGV[6]), tonumber(ARGV[7]) -- the dead letters' bounds (age in ms)
local born = tonumber(ARGV[8]) -- when the worker joined (ms; 0: unknown)
local keep = {} -- ARGV[9...]: pids to keep
for i = 9, #ARGV do keep[ARGV[i]] = true end

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
if mode == 'expired' then
  local now = now_ms()
  local score = redis.call('ZSCORE', leases_key, worker)
  if score and tonumber(score) > now then
    return -1 - (tonumber(score) - now)
  end
end

local mine = {}
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if proc_owner(v) == worker and not keep[pid] then
    mine[#mine + 1] = {pid = pid, v = v}
  end
end
-- With a window, every mode marks a task held longer than it as healthy
-- (a persistent task given back at a shutdown or a fence); only a reclaim
-- counts a death.
local poison
local buried = {}
local holds_released = 0 -- sequences whose dead letter the bounds trimmed (see trim_dead)
if poison_window > 0 then
  local now = now_ms()
  poison = {now = now, window = poison_window, limit = poison_limit, born = born,
    count = mode == 'expired' and poison_limit > 0}
  poison.bury = function(entry, holder, deaths, pid)
    local why = 'its holder died soon after starting it, ' .. deaths .. ' times'
    retain(results_key, retained_key, channel, entry, 'dead', pid, 0, why, 'poison')
    flow_notice(flows_key, entry, 'dead')
    local h, payload = entry_split(entry)
    h = attempt_buried(errors_key, entry_id(entry), h, now, holder, why)
    h = header_set(header_set(header_set(h, 'D', ms(now)), 'W', holder), 'K', 'poison')
    redis.call('ZADD', dead_key, ms(now), h .. ':' .. payload)
    sequence_died(meta_key, entry)
    holds_released = holds_released + trim_dead(dead_key, errors_key, dead_max, now - dead_age, meta_key)
    stat('d', 1, entry)
    buried[#buried + 1] = entry_id(entry)
  end
end
local upto = redis.call('HGET', meta_key, 'seq') or '0'
local returned, dropped, freed = return_to_front(waiting_key, procs_key, meta_key, errors_key, unique_key, progress_key, mine, poison,
  mode == 'expired' and now_ms() or nil)
drop_meta_if_gone(procs_key, meta_key)
groups_settle(idle_key, channel)
-- A peer reclaims a dead worker's tasks; a worker giving its own back
-- (force, or orphans: those whose dequeue reply it lost) requeues them.
stat(mode == 'expired' and 'k' or 'q', returned)
stats_flush(stats_key)
if mode ~= 'orphans' then
  redis.call('ZREM', leases_key, worker)
  redis.call('ZREM', idle_key, worker)
end
if returned > 0 then
  publish(channel, 'w' .. returned)
elseif mode == 'orphans' then
  -- Dropped processes free slots under a concurrency limit.
  slots_freed(meta_key, waiting_key, idle_key, channel, freed)
else
  -- The worker may have been named in a work event it never acted on: it
  -- died parked in the idle set, or stopped listening before it left it.
  -- Wake everyone if tasks wait.
  local waiting = waiting_len(waiting_key)
  if waiting > 0 then
    publish(channel, 'w' .. waiting)
  end
end
-- A sequence whose dead letter the bounds trimmed goes on: nobody polls.
if holds_released > 0 then wake(idle_key, channel, holds_released) end
local out = {returned, upto, dropped - #buried}
for _, id in ipairs(buried) do out[#out + 1] = id end
return out
