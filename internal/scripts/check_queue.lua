-- Look at one queue for Client.Check, changing nothing: whether it exists,
-- how many tasks wait, every worker with a lease entry or a process in it
-- (and whether its lease is live), and the processes whose owner holds no
-- live lease here (orphans: their owner can no longer finish or stop them),
-- the extra weight in flight as counted (meta 'wx') and as the processes
-- hold it (see entry_weight), the progress reports whose process is
-- gone, and the controls whose stored value the scripts cannot read (see
-- control_value; the value cut to 64 bytes).
-- Returns {has name (0/1), waiting, {worker, live (0/1), ...},
--          {pid, owner, state, task, ...}, {counted, held}, stray reports,
--          {control, value, ...}}.
local waiting_key, procs_key, leases_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayed_key, high_key, low_key, progress_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local gwait_key = KEYS[9] -- see GROUPS in common.lua

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
local all = redis.call('HGETALL', procs_key)
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if #v >= 1 + OWNER_LEN then -- anything shorter was never written by worqr
    local owner = proc_owner(v)
    see(owner)
    extra = extra + entry_weight(proc_task(v)) - 1
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
local controls = {'limit', 'rate', 'per'}
local values = redis.call('HMGET', meta_key, unpack(controls))
for i, name in ipairs(controls) do
  local v = values[i]
  if v and not control_value(v) then
    unreadable[#unreadable + 1] = name
    unreadable[#unreadable + 1] = string.sub(v, 1, 64)
  end
end
return {redis.call('HEXISTS', meta_key, 'name'), waiting, owners, orphans, {counted, extra}, stray, unreadable}
