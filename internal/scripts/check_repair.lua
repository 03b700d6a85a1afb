-- Repair one queue for Client.Check. Progress reports whose process is
-- gone (none should be: every script that ends a process drops its
-- report) are removed. Every process whose owner holds no
-- live lease on the queue goes back to the FRONT of the queue, oldest
-- first, as release.lua does for one dead worker (cancelled processes and
-- those of a deleted queue are dropped, not requeued); expired lease
-- entries are removed; and a queue holding waiting tasks whose record was
-- lost gets its name back; the count of weight in flight (meta 'wx', see
-- entry_weight) is set to what the processes left hold, and so is each
-- group's count of slots held (GROUPS.running: a group whose count falls
-- and that has tasks waiting out of turn is made ready, and parked
-- runtimes woken, as groups_settle does when processes end); and progress
-- reports whose process is gone are removed; a gathering of aggregated
-- tasks without a deadline (see AGG.undue), which would never be flushed
-- by time, gets one of now: its tasks may have waited past MaxDelay
-- already, so the next promotion flushes it, and the workers serving the
-- queue hear of it as of a delayed task; and the turn fields no dequeue
-- would read are removed (see group_lib().turns_stale). Owners are
-- judged here, when the repair runs, never from the check's earlier
-- look: a process a live worker dequeued in between, or one whose owner
-- is live, is not touched.
-- Returns {requeued, dropped, lease entries removed, has name (0/1),
--          weight count corrected (0/1), groups whose count was corrected,
--          gatherings given a deadline, turn fields removed}.
local waiting_key, procs_key, leases_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayed_key, errors_key, unique_key, idle_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local high_key, low_key, progress_key = KEYS[9], KEYS[10], KEYS[11]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[12], KEYS[13], KEYS[14], KEYS[15] -- see GROUPS in common/waiting.lua
local gather_key, gather_due_key = KEYS[16], KEYS[17] -- see AGG in common/aggregation.lua
local channel, queue = ARGV[1], ARGV[2] -- queue: its name

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local now = now_ms()
local live = {}
local orphans = {}
local extra = 0 -- the extra weight of the processes that stay
local all_held, live_held = {}, {} -- group -> the slots of all its processes, of those that stay
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if #v >= 1 + OWNER_LEN then
    local owner = proc_owner(v)
    if live[owner] == nil then
      live[owner] = lease_live(leases_key, owner, now) and true or false
    end
    local w, g = entry_weight(proc_task(v)), entry_group(proc_task(v))
    if g then all_held[g] = (all_held[g] or 0) + w end
    if not live[owner] then
      orphans[#orphans + 1] = {pid = pid, v = v}
    else
      extra = extra + w - 1
      if g then live_held[g] = (live_held[g] or 0) + w end
    end
  end
end
-- The groups' counts as stored, judged against all the processes; the
-- orphans' slots are given back with them, below.
local counts = {}
local regrouped = 0
local stored = redis.call('HGETALL', grunning_key)
for i = 1, #stored, 2 do
  local g, n = stored[i], tonumber(stored[i + 1]) -- nil: not a number
  if n ~= (all_held[g] or 0) then regrouped = regrouped + 1 end
  if not n then redis.call('HDEL', grunning_key, g) end -- read as 0 below
  counts[g] = n or 0
end
for g in pairs(all_held) do
  if not counts[g] then
    counts[g] = 0
    regrouped = regrouped + 1
  end
end
-- An orphan's holder was lost: its attempt is noted as reclaimed.
local requeued, dropped, freed = return_to_front(waiting_key, procs_key, meta_key, errors_key, unique_key, progress_key, orphans, nil, now)
local counted = tonumber(redis.call('HGET', meta_key, 'wx') or '0') or 0
local corrected = 0
if counted ~= extra then
  redis.call('HDEL', meta_key, 'wx')
  weight_moved(meta_key, extra)
  corrected = 1
  freed = freed + math.max(counted - extra, 0)
end
local removed = redis.call('ZREMRANGEBYSCORE', leases_key, '-inf', ms(now))
-- A progress record starts with its process id (see progress.lua).
local reports = redis.call('HGETALL', progress_key)
for i = 1, #reports, 2 do
  local pid = string.match(reports[i + 1], '^[^,]*')
  if redis.call('HEXISTS', procs_key, pid) == 0 then
    redis.call('HDEL', progress_key, reports[i])
  end
end
local holds = waiting_len(waiting_key) + redis.call('ZCARD', delayed_key)
if holds > 0 and redis.call('HEXISTS', meta_key, 'name') == 0 then
  name_queue(meta_key, queue)
end
drop_meta_if_gone(procs_key, meta_key)
if regrouped > 0 then
  -- What return_to_front gave back is replaced by what brings each
  -- group's count to what its processes that stay hold (a negative
  -- amount raises a count).
  local G = group_lib()
  G.freed = {}
  for g, n in pairs(counts) do
    if n ~= (live_held[g] or 0) then G.freed[g] = n - (live_held[g] or 0) end
  end
end
groups_settle(idle_key, channel, true)
if requeued > 0 then
  publish(channel, 'w' .. requeued)
else
  slots_freed(meta_key, waiting_key, idle_key, channel, freed)
end
local undue = agg_lib().undue(gather_key, gather_due_key)
if #undue > 0 then
  local at = now_us()
  for _, key in ipairs(undue) do redis.call('ZADD', gather_due_key, ms(at), key) end
  publish(channel, 's' .. ms(at))
end
local turns = group_lib().turns_stale(meta_key, glimits_key, gready_key, true)
return {requeued, dropped, removed, redis.call('HEXISTS', meta_key, 'name'), corrected, regrouped, #undue, turns}
