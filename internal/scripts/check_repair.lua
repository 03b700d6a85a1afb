-- Repair one queue for Client.Check. Progress reports whose process is
-- gone (none should be: every script that ends a process drops its
-- report) are removed. Every process whose owner holds no
-- live lease on the queue goes back to the FRONT of the queue, oldest
-- first, as release.lua does for one dead worker (cancelled processes and
-- those of a deleted queue are dropped, not requeued); expired lease
-- entries are removed; and a queue holding waiting tasks whose record was
-- lost gets its name back; the count of weight in flight (meta 'wx', see
-- entry_weight) is set to what the processes left hold; and progress
-- reports whose process is gone are removed. Owners are judged here, when
-- the repair runs, never from the check's earlier look: a process a live
-- worker dequeued in between, or one whose owner is live, is not touched.
-- KEYS: waiting, procs, leases, meta, delayed, errors, unique, idle, high, low,
--       progress
-- ARGV: channel, queue name
-- Returns {requeued, dropped, lease entries removed, has name (0/1),
--          weight count corrected (0/1)}.
set_lists(KEYS[1], KEYS[9], KEYS[10])
local now = now_ms()
local live = {}
local orphans = {}
local extra = 0 -- the extra weight of the processes that stay
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  local pid, v = all[i], all[i + 1]
  if #v >= 1 + OWNER_LEN then
    local owner = proc_owner(v)
    if live[owner] == nil then
      live[owner] = lease_live(KEYS[3], owner, now) and true or false
    end
    if not live[owner] then
      orphans[#orphans + 1] = {pid = pid, v = v}
    else
      extra = extra + entry_weight(proc_task(v)) - 1
    end
  end
end
local requeued, dropped, freed = return_to_front(KEYS[1], KEYS[2], KEYS[4], KEYS[6], KEYS[7], KEYS[11], orphans)
local counted = tonumber(redis.call('HGET', KEYS[4], 'wx') or '0') or 0
local corrected = 0
if counted ~= extra then
  redis.call('HDEL', KEYS[4], 'wx')
  weight_moved(KEYS[4], extra)
  corrected = 1
  freed = freed + math.max(counted - extra, 0)
end
local removed = redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ms(now))
-- A progress record starts with its process id (see progress.lua).
local reports = redis.call('HGETALL', KEYS[11])
for i = 1, #reports, 2 do
  local pid = string.match(reports[i + 1], '^[^,]*')
  if redis.call('HEXISTS', KEYS[2], pid) == 0 then
    redis.call('HDEL', KEYS[11], reports[i])
  end
end
local holds = waiting_len(KEYS[1]) + redis.call('ZCARD', KEYS[5])
if holds > 0 and redis.call('HEXISTS', KEYS[4], 'name') == 0 then
  name_queue(KEYS[4], ARGV[2])
end
drop_meta_if_gone(KEYS[2], KEYS[4])
if requeued > 0 then
  publish(ARGV[1], 'w' .. requeued)
else
  slots_freed(KEYS[4], KEYS[1], KEYS[8], ARGV[1], freed)
end
return {requeued, dropped, removed, redis.call('HEXISTS', KEYS[4], 'name'), corrected}
