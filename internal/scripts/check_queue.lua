-- Look at one queue for Client.Check, changing nothing: whether it exists,
-- how many tasks wait, every worker with a lease entry or a process in it
-- (and whether its lease is live), and the processes whose owner holds no
-- live lease here (orphans: their owner can no longer finish or stop them),
-- the extra weight in flight as counted (meta 'wx') and as the processes
-- hold it (see entry_weight), the progress reports whose process is
-- gone, and the controls whose stored value the scripts cannot read (see
-- control_value; the value cut to 64 bytes), and the groups whose count
-- of slots held (GROUPS.running) is not what their processes hold (the
-- sum of their weights, whatever their state: a process holds its slots
-- until it ends), the group as stored (escaped), and the gatherings of
-- aggregated tasks that hold tasks but have no deadline (see AGG.undue),
-- and the turn fields no dequeue would read (see group_lib().turns_stale).
-- Returns {has name (0/1), waiting, {worker, live (0/1), ...},
--          {pid, owner, state, task, ...}, {counted, held}, stray reports,
--          {control, value, ...}, {group, counted, held, ...},
--          gatherings without a deadline, stale turn fields}.
local waiting_key, procs_key, leases_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayed_key, high_key, low_key, progress_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local gwait_key, grunning_key = KEYS[9], KEYS[10] -- see GROUPS in common/waiting.lua
local gather_key, gather_due_key = KEYS[11], KEYS[12] -- see AGG in common/aggregation.lua
local glimits_key, gready_key = KEYS[13], KEYS[14] -- the groups' settings and turns

set_lists(waiting_key, high_key, low_key, gwait_key)
local now = now_ms()
local live, owners = {}, {}
local function see(id)
  if live[id] == nil then
    live[id] = lease_live(leases_key, id, now) and 1 or 0
    owners[#owners + 1] = id
    owners[#owners + 1] = live[id]
  end
end
for _, id in ipairs(redis.call('ZRANGE', leases_key, 0, -1)) do
  see(id)
end
local orphans = {}
local extra = 0
local held = {} -- group -> the slots its processes hold
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if #v >= 1 + OWNER_LEN then -- anything shorter was never written by worqr
    local owner = proc_owner(v)
    see(owner)
    local w = entry_weight(proc_task(v))
    extra = extra + w - 1
    local g = entry_group(proc_task(v))
    if g then held[g] = (held[g] or 0) + w end
    if live[owner] == 0 then
      orphans[#orphans + 1] = pid
      orphans[#orphans + 1] = owner
      orphans[#orphans + 1] = proc_state(v)
      orphans[#orphans + 1] = proc_task(v)
    end
  end
end
local waiting = waiting_len(waiting_key) + redis.call('ZCARD', delayed_key)
local counted = tonumber(redis.call('HGET', meta_key, 'wx') or '0') or 0
local stray = 0
local reports = redis.call('HGETALL', progress_key)
for i = 2, #reports, 2 do
  if redis.call('HEXISTS', procs_key, string.match(reports[i], '^[^,]*')) == 0 then
    stray = stray + 1
  end
end
local unreadable = {}
local controls = {'limit', 'rate', 'per', 'glimit', 'gturns', 'gsize'}
local values = redis.call('HMGET', meta_key, unpack(controls))
for i, name in ipairs(controls) do
  local v = values[i]
  if v and not control_value(v) then
    unreadable[#unreadable + 1] = name
    unreadable[#unreadable + 1] = string.sub(v, 1, 64)
  end
end
local miscounted = {}
local counts = redis.call('HGETALL', grunning_key)
for i = 1, #counts, 2 do
  local g, n = counts[i], tonumber(counts[i + 1]) -- nil: not a number
  if n ~= (held[g] or 0) then
    miscounted[#miscounted + 1] = g
    miscounted[#miscounted + 1] = n or -1
    miscounted[#miscounted + 1] = held[g] or 0
  end
  held[g] = nil
end
for g, n in pairs(held) do
  miscounted[#miscounted + 1] = g
  miscounted[#miscounted + 1] = 0
  miscounted[#miscounted + 1] = n
end
return {redis.call('HEXISTS', meta_key, 'name'), waiting, owners, orphans, {counted, extra}, stray, unreadable, miscounted, #agg_lib().undue(gather_key, gather_due_key), group_lib().turns_stale(meta_key, glimits_key, gready_key, false)}
