-- Finish processes: delete each one, but only if it still belongs to its
-- worker and that worker's lease on the queue is live. Finish calls that
-- overlap are sent as one script call, so it takes many.
-- Each one's progress report goes with it. A task that asked for it
-- keeps its outcome (see retain), with the
-- handler's result.
-- A task holding a unique key gives it up; with a concurrency limit, the
-- freed slots (a weighted task's several) wake runtimes the limit held
-- back.
-- Returns one code per process: -1 lease gone, 0 not owned (lost), else the
-- code of the state it had: 1 active, 2 cancelled, 3 deleted; then the
-- Redis clock (µs), from which the client counts the runs of the active
-- ones (their pids are their dequeue times) for the stats.
local procs_key, leases_key, meta_key, errors_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local results_key, retained_key, waiting_key, idle_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local unique_key, high_key, low_key, progress_key, stats_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[14], KEYS[15], KEYS[16], KEYS[17] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[18] -- workflow tasks' notices (see flow_notice)
local channel, counts = ARGV[1], ARGV[2] -- counts: stats counted by the client ('' for none: see stats_add)
-- Then per process j, ARGV[3j...3j + 2]: worker, pid, result.

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local now_u, now, pids, vals = batch_open(procs_key, stats_key, meta_key, counts, 3)
local live, taken, gone, ids, failed, out = {}, {}, {}, {}, {}, {}
local deleted = false
local freed = 0 -- the weight of the processes removed (see entry_weight)
-- Per process, the usual task (a header that is only its id: no
-- weight, no starts before, nothing retained, no unique key) costs a
-- few string calls; only one whose header has fields goes through the
-- helpers that read them. Each call into Lua or C costs Redis some
-- hundreds of instructions, and this runs for every task.
local argv = ARGV -- its tail, read per process (a local is quicker to index)
local find, sub = string.find, string.sub
local at = 2 + OWNER_LEN -- where a record's entry starts (see proc_task)
local ngone = 0
for j = 1, #pids do
  local pid, v = pids[j], vals[j]
  local worker = argv[3 * j]
  local refused = batch_refusal(leases_key, now, live, taken, worker, pid, v)
  if refused then
    out[j] = refused
  else
    ngone = ngone + 1
    gone[ngone] = pid
    local state = sub(v, 1, 1) -- proc_state
    deleted = deleted or state == 'd'
    out[j] = STATE_CODE[state]
    -- The header's text (all of the entry if it has no ':'): the id
    -- unless it holds a ','.
    local id = sub(v, at, (find(v, ':', at, true) or 0) - 1)
    local comma = find(id, ',', 1, true)
    if comma then
      -- The helpers read the header alone (with its ':'), never a copy
      -- of the payload; a field is looked for in the header only. The
      -- usual such header (a task retried: its 'a', 'f' and 'd' fields)
      -- needs none of them, nor the header with its ':' made for them.
      local h = id
      local head -- h .. ':', made once a helper needs it
      id = sub(h, 1, comma - 1) -- see entry_id
      local w = 1
      if find(h, ',w', 1, true) then
        head = h .. ':'
        w = entry_weight(head)
      end
      freed = freed + w
      local g = find(h, ',g', 1, true)
      if g then
        -- Its group: the field's value, up to the next field. Cut here,
        -- it costs less than group_released's reading of the header.
        group_freed(sub(h, g + 2, (find(h, ',', g + 2, true) or 0) - 1), w)
      end
      -- Only a task started before can have an error recorded.
      if find(h, ',a', 1, true) then
        failed[#failed + 1] = id
      end
      if state == 'a' then
        if find(h, ',R', 1, true) then
          head = head or h .. ':'
          retain(results_key, retained_key, channel, head, 'ok', pid, 1, argv[3 * j + 2])
        end
        if find(h, ',F', 1, true) then
          head = head or h .. ':'
          flow_notice(flows_key, head, 'ok')
        end
      end
      if find(h, ',u', 1, true) then
        head = head or h .. ':'
        release_unique(unique_key, head)
      end
    else
      freed = freed + 1
    end
    ids[ngone] = id
  end
end
if #gone > 0 then
  redis.call('HDEL', procs_key, unpack(gone))
  redis.call('HDEL', progress_key, unpack(ids))
  weight_moved(meta_key, #gone - freed)
  slots_freed(meta_key, waiting_key, idle_key, channel, freed)
  groups_settle(idle_key, channel)
end
if #failed > 0 then
  errors_drop(errors_key, failed)
end
-- Only a deleted queue can have lost its name (see take_own_process).
if deleted then
  drop_meta_if_gone(procs_key, meta_key)
end
out[#out + 1] = now_u
return out
