-- Finish processes: delete each one, but only if it still belongs to its
-- worker and that worker's lease on the queue is live. Finish calls that
-- overlap are sent as one script call, so it takes many.
-- Each one's progress report goes with it. A task that asked for it
-- keeps its outcome (see retain), with the
-- handler's result.
-- A task holding a unique key gives it up; with a concurrency limit, the
-- freed slots (a weighted task's several) wake runtimes the limit held
-- back.
-- A workflow step's task whose workflow shares the queue's slot (its
-- keys passed: see home_release) has the step's end recorded here, not
-- by a notice carried later.
-- Returns one code per process: -1 lease gone, 0 not owned (lost), else the
-- code of the state it had: 1 active, 2 cancelled, 3 deleted, 4 active and
-- its step's end recorded in its workflow (no notice left); then the
-- Redis clock (µs), from which the client counts the runs of the active
-- ones (their pids are their dequeue times) for the stats, and which is
-- every notice's stamp: the worker carries them without reading them.
local procs_key, leases_key, meta_key, errors_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local results_key, retained_key, waiting_key, idle_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local unique_key, high_key, low_key, progress_key, stats_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12], KEYS[13]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[14], KEYS[15], KEYS[16], KEYS[17] -- see GROUPS in common/waiting.lua
local flows_key = KEYS[18] -- workflow tasks' notices (see flow_notice)
-- Then the keys of each workflow of the processes' steps that shares the
-- queue's slot, eleven each (WorkflowKeys' order), from KEYS[19].
local channel, counts = ARGV[1], ARGV[2] -- counts: stats counted by the client ('' for none: see stats_add)
-- Then per process j, ARGV[4j - 1...4j + 2]: worker, pid, result, and the
-- place of its step's workflow among those keys (from 1; '0' for none).

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local now_u, now, pids, vals = batch_open(procs_key, stats_key, meta_key, counts, 4)

-- Record the ends of steps (each {step, id, result, ...}), the successes of
-- one workflow's tasks, in that workflow, whose keys are KEYS[at + 1...
-- at + 11], as wf_release.lua records their notices in bulk: each step
-- ended 'ok' with its result and stamp (seen), its children's counts of
-- parents left lowered, the workflow closed once no step is open. Only
-- the common case is recorded here: a workflow that runs, every step not
-- ended, never recorded later than now, freed by no earlier end (a death
-- before a revival), no child made ready by them (nor one of them a
-- child of another), and no more children than a release settles in a
-- call (FLOW_RELEASE_MAX: the others' are settled over several calls).
-- Anything else returns nil, having written nothing, and the steps
-- leave notices, carried as any other: a child made ready is enqueued
-- by the carry (its queue may be in another slot).
-- Returns whether it recorded them.
local home_release -- a closure, made only for a call that passes a workflow's keys
if #KEYS > 18 then
  function home_release(at, steps)
    local flow, steps_key, ids_key, left_key = KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4]
    local kids_key, results_key, freed_key, seen_key = KEYS[at + 5], KEYS[at + 8], KEYS[at + 9], KEYS[at + 10]
    if redis.call('HGET', flow, 'state') ~= 'running' then
      return false
    end
    local names, mine = {}, {}
    for i, st in ipairs(steps) do
      if mine[st.step] then
        return false
      end
      mine[st.step] = true
      names[i] = st.step
    end
    -- The children first: an end that frees one (a chain's) is the usual
    -- reason to decline, told in two reads.
    local kids, down = flow_kids_down(kids_key, names, mine)
    if not kids then
      return false
    end
    local lefts, newleft = hmget(left_key, kids), {}
    for i, kid in ipairs(kids) do
      local left = (tonumber(lefts[i]) or 0) - down[kid]
      if left <= 0 then
        return false
      end
      newleft[#newleft + 1] = kid
      newleft[#newleft + 1] = left
    end
    local curs, seens, befores = hmget(steps_key, names), hmget(seen_key, names), hmget(freed_key, names)
    for i = 1, #names do
      local cur = curs[i]
      if not (cur == 'w' or cur == 'r' or cur == 'q') or befores[i] or (tonumber(seens[i]) or 0) >= now_u then
        return false
      end
    end
    local stamp = ms(now_u)
    local seen, results, ended = {}, {}, {}
    for i, st in ipairs(steps) do
      seen[#seen + 1], seen[#seen + 2] = st.step, stamp
      results[#results + 1], results[#results + 2] = st.step, st.result
      ended[#ended + 1], ended[#ended + 2] = st.step, 'ok'
      -- Its id, if its end came before its mark as queued.
      if curs[i] ~= 'q' then
        redis.call('HSETNX', ids_key, st.step, st.id)
      end
    end
    for _, put in ipairs({{seen_key, seen}, {results_key, results}, {steps_key, ended}, {left_key, newleft}}) do
      local key, pairs_ = put[1], put[2]
      for i = 1, #pairs_, 2000 do
        redis.call('HSET', key, unpack(pairs_, i, math.min(i + 1999, #pairs_)))
      end
    end
    if redis.call('HINCRBY', flow, 'open', -#names) <= 0 then
      local counts = redis.call('HMGET', flow, 'dead', 'cancelled')
      local failed = (tonumber(counts[1]) or 0) > 0 or (tonumber(counts[2]) or 0) > 0
      local keys = {}
      for i = 1, 11 do
        keys[i] = KEYS[at + i]
      end
      -- Its channel is its flow key's, 'events' for 'flow' (WorkflowKeys).
      flow_close(keys, string.sub(flow, 1, -5) .. 'events', failed and 'failed' or 'succeeded')
    end
    return true
  end
end

local live, taken, gone, ids, failed, out = {}, {}, {}, {}, {}, {}
local nfailed = 0 -- failed's length: two fields per task
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
-- The steps of workflows whose keys are here, by their place: {j, pid,
-- head, id, step, result} each.
local homes, home_order, nhomes = {}, {}, 0
for j = 1, #pids do
  local pid, v = pids[j], vals[j]
  local worker = argv[4 * j - 1]
  local refused = batch_refusal(leases_key, now, live, taken, worker, pid, v)
  if refused then
    out[j] = refused
  else
    ngone = ngone + 1
    gone[ngone] = pid
    local state = sub(v, 1, 1) -- proc_state
    deleted = deleted or state == 'd'
    out[j] = STATE_CODE[state]
    -- Where the header ends (all of the entry if it has no ':'), and its
    -- first ',', if it has one: plain finds, no copy of the header (one
    -- without fields is the id).
    local c = find(v, ':', at, true) or 0
    local comma = find(v, ',', at, true)
    if comma and c > 0 and comma > c then comma = nil end
    local id, usual
    if comma then
      -- A task retried once (the usual one: the header retry.lua writes
      -- for a first failure, see first_attempt_fields) has no field
      -- looked for below, and no error or attempt in the errors hash:
      -- one anchored find tells so, looking at its counts and no
      -- further.
      usual = find(v, '^,a1,f1,d%x+,H1%.', comma)
      id = sub(v, at, comma - 1) -- see entry_id
    else
      id = sub(v, at, c - 1)
    end
    if usual then
      freed = freed + 1
    elseif comma then
      -- The helpers read the header alone (with its ':'), never a copy
      -- of the payload; a field is looked for in the header only.
      local h = sub(v, at, c - 1)
      comma = comma - at + 1
      local head -- h .. ':', made once a helper needs it
      -- A header whose fields are only counts of starts and failures, a
      -- due time, and its last attempt and error has none of the fields
      -- looked for one by one below either: one find tells so. The
      -- attempt and error, after the fields an enqueue sets (see
      -- attempt_added), are cut off first: a pattern costs Redis tens of
      -- instructions a byte it looks at.
      local hist = find(h, ',H', comma, true)
      local counts_only = not find(hist and sub(h, 1, hist - 1) or h, ',[^afd]', comma)
      if counts_only then
        freed = freed + 1
      else
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
      end
      -- Only a task started before can have an error or older attempts
      -- in the errors hash: their fields (see errors_drop) go in one
      -- HDEL. One whose entry carries its only attempt (see
      -- attempt_added) has none there.
      if find(h, ',a', 1, true) and not (hist and find(h, ',H1.', hist, true) == hist) then
        nfailed = nfailed + 2
        failed[nfailed - 1] = id
        failed[nfailed] = id .. ':a'
      end
      if not counts_only then
        if state == 'a' then
          local home = argv[4 * j + 2]
          if home ~= '0' and find(h, ',F', 1, true) then
            -- Its workflow's keys are here: recorded below, with the others
            -- of its workflow, or retained and noticed as any other.
            head = head or h .. ':'
            local f = header_get(entry_split(head), 'F')
            local dot = find(f, '.', 1, true)
            local w = homes[home]
            if not w then
              w = {}
              homes[home] = w
              nhomes = nhomes + 1
              home_order[nhomes] = home
            end
            w[#w + 1] = {j = j, pid = pid, head = head, id = id, step = sub(f, dot + 1), result = argv[4 * j + 1]}
          else
            if find(h, ',R', 1, true) then
              head = head or h .. ':'
              retain(results_key, retained_key, channel, head, 'ok', pid, 1, argv[4 * j + 1])
            end
            if find(h, ',F', 1, true) then
              head = head or h .. ':'
              flow_notice(flows_key, head, 'ok', now_u)
            end
          end
        end
        if find(h, ',u', 1, true) then
          head = head or h .. ':'
          release_unique(unique_key, head)
        end
      end
    else
      freed = freed + 1
    end
    ids[ngone] = id
  end
end
if nhomes > 0 then
  -- Their outcomes are kept together (a workflow's steps all ask for it).
  local kept = {}
  for _, home in ipairs(home_order) do
    local steps = homes[home]
    local recorded = home_release(18 + 11 * (tonumber(home) - 1), steps)
    for _, st in ipairs(steps) do
      if recorded then
        out[st.j] = 4
      end
      kept[#kept + 1] = {st.head, st.pid, st.result}
      if not recorded then
        flow_notice(flows_key, st.head, 'ok', now_u)
      end
    end
  end
  retain_many(results_key, retained_key, channel, kept, 'ok', 1)
end
if #gone > 0 then
  redis.call('HDEL', procs_key, unpack(gone))
  redis.call('HDEL', progress_key, unpack(ids))
  weight_moved(meta_key, #gone - freed)
  slots_freed(meta_key, waiting_key, idle_key, channel, freed)
  groups_settle(idle_key, channel)
end
if nfailed > 0 then
  redis.call('HDEL', errors_key, unpack(failed))
end
-- Only a deleted queue can have lost its name (see take_own_process).
if deleted then
  drop_meta_if_gone(procs_key, meta_key)
end
out[#out + 1] = now_u
return out
