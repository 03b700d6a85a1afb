-- Finish processes: delete each one, but only if it still belongs to its
-- worker and that worker's lease on the queue is live. Finish calls that
-- overlap are sent as one script call, so it takes many.
-- Each one's progress report goes with it. A task that asked for it
-- keeps its outcome (see retain), with the
-- handler's result.
-- A task holding a unique key gives it up; with a concurrency limit, the
-- freed slots (a weighted task's several) wake runtimes the limit held
-- back.
-- KEYS: procs, leases, meta, errors, results, retained, waiting, idle,
--       unique, high, low, progress, stats
-- ARGV: channel, stats counted by the client ('' for none: see
--       stats_add), then per process: worker, pid, result
-- Returns one code per process: -1 lease gone, 0 not owned (lost), else the
-- code of the state it had: 1 active, 2 cancelled, 3 deleted; then the
-- Redis clock (µs), from which the client counts the runs of the active
-- ones (their pids are their dequeue times) for the stats.
set_lists(KEYS[7], KEYS[10], KEYS[11])
local now_u, now, pids, vals = batch_open(KEYS[1], KEYS[13], KEYS[3], 3)
local live, taken, gone, ids, failed, out = {}, {}, {}, {}, {}, {}
local deleted = false
local freed = 0 -- the weight of the processes removed (see entry_weight)
for j, pid in ipairs(pids) do
  local worker, v = ARGV[3 * j], vals[j]
  local refused = batch_refusal(KEYS[2], now, live, taken, worker, pid, v)
  if refused then
    out[j] = refused
  else
    gone[#gone + 1] = pid
    local state = proc_state(v)
    deleted = deleted or state == 'd'
    out[j] = STATE_CODE[state]
    -- Only a task started before can have an error recorded.
    local entry = proc_task(v)
    freed = freed + entry_weight(entry)
    ids[#ids + 1] = entry_id(entry)
    if header_has(entry, 'a') then
      failed[#failed + 1] = entry_id(entry)
    end
    if state == 'a' then
      retain(KEYS[5], KEYS[6], ARGV[1], entry, 'ok', pid, 1, ARGV[3 * j + 2])
    end
    release_unique(KEYS[9], entry)
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[12], unpack(ids))
  weight_moved(KEYS[3], #gone - freed)
  slots_freed(KEYS[3], KEYS[7], KEYS[8], ARGV[1], freed)
end
if #failed > 0 then
  redis.call('HDEL', KEYS[4], unpack(failed))
end
-- Only a deleted queue can have lost its name (see take_own_process).
if deleted then
  drop_meta_if_gone(KEYS[1], KEYS[3])
end
out[#out + 1] = now_u
return out
