-- Retry processes' tasks: record each one's error, then put it at the back
-- of the queue (no delay) or in the delayed set until now + delay (a task
-- of a sequence, a group with a limit of 1, waits in its group instead, at
-- its front, due then: see sequence_of), and
-- wake the queue (one work event for all that went back at once, naming
-- parked runtimes as an enqueue's does: see wake) or announce the earliest
-- due time. Each only if it still belongs to its
-- worker and that worker's lease on the queue is live. A task that was
-- cancelled, or whose queue was deleted, is dropped instead: a retry must
-- not bring it back. Retry calls that overlap are sent as one script call
-- (see coalesce.go), so it takes many, as finish.lua does; a batch of
-- plain tasks retried at once goes to retry_plain.lua instead, and here
-- only if that script leaves it whole (see Store.Retry). The task's
-- progress report, if any, goes with its process, and a weighted task's
-- slots (see entry_weight) with it. A retried task notes when it became
-- due again (see entry_due) for the wait stats; the client counts it
-- ('r', and its run time, from the clock this returns), as finish.lua's.
-- Each retried attempt is noted in its task's entry, with its error (see
-- attempt_added).
-- Returns one code per process: -1 lease gone, 0 not owned (lost), else
-- the code of the state it had: 1 active, 2 cancelled, 3 deleted; then the
-- Redis clock (µs).
local procs_key, leases_key, waiting_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local delayed_key, errors_key, idle_key, unique_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local high_key, low_key, progress_key, stats_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local gwait_key, gready_key, grunning_key, glimits_key = KEYS[13], KEYS[14], KEYS[15], KEYS[16] -- see GROUPS in common.lua
local channel, counts = ARGV[1], ARGV[2] -- counts: stats counted by the client ('' for none: see stats_add)
-- Then per process j, ARGV[4j - 1...4j + 2]: worker, pid, delay (µs), error
-- ('' for none).

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, grunning_key, glimits_key)
local t_us, now, pids, vals = batch_open(procs_key, stats_key, meta_key, counts, 4)
local live, taken, gone, ids, out = {}, {}, {}, {}, {}
local errs, pushed, delayed = {}, {}, {}
-- The lengths of gone (and ids, as long) and errs, counted rather than
-- taken (#) per process.
local ngone, nerrs = 0, 0
local npushed, freed, first = 0, 0, nil
local extra = 0 -- the extra weight of the processes removed
local deleted = false
-- Per process, the usual task (a header that is only its id: its first
-- failure, no weight, group, priority or unique key) costs a few string
-- calls: its new header is written in one go, and its payload copied
-- once. Only a header with fields goes through the helpers that read
-- them, and they read the header alone, never a copy of the payload.
local find, sub = string.find, string.sub
-- Whether the group of a retried task (its header with a ':') is a
-- sequence: a concurrency limit of 1, its own or the default. A task of a
-- sequence retried with a delay waits in its group, in its place (the
-- front, by its id), carrying its due time: the dequeue holds the group
-- until then (see dequeue.lua), so that its later tasks do not start
-- before it.
local glimit -- the default group limit, once read
local function sequence_of(head)
  local limit = control_value(redis.call('HGET', glimits_key, entry_group(head)))
  if not limit then
    if glimit == nil then glimit = control_value(redis.call('HGET', meta_key, 'glimit')) or false end
    limit = glimit
  end
  return limit == 1
end
local at = 2 + OWNER_LEN -- where a record's entry starts (see proc_task)
local argv = ARGV -- its tail, read per process (a local is quicker to index)
local due_now = ',d' .. string.format('%x', t_us) -- see entry_due
-- The usual retry (a first failure, at once) adds the same fields to
-- every header: written once.
local first_now = ',a1,f1' .. due_now
local ended = math.floor(t_us / 1000)
local firsts = {} -- see first_attempt_fields
-- An entry for the back of list (its left end), pushed after the loop
-- with the others for it, in order, in one call.
local function push(list, entry)
  local entries = pushed[list]
  if not entries then
    entries = {}
    pushed[list] = entries
  end
  entries[#entries + 1] = entry
end
-- A failed attempt noted last in the header h of a task with fields, its
-- due time given (see attempt_added); the history's older records go out
-- with the errors hash's other fields, in one HSET for all.
local function noted(h, id, worker, err, started)
  local field, older
  h, field, older = attempt_added(errors_key, id, h, ended, 'r', worker, err, started)
  if field then
    errs[nerrs + 1], errs[nerrs + 2] = field, older
    nerrs = nerrs + 2
  end
  return h
end
for j, pid in ipairs(pids) do -- the tail of ARGV, 4 values per process
  local worker, v = argv[4 * j - 1], vals[j]
  local refused = batch_refusal(leases_key, now, live, taken, worker, pid, v)
  if refused then
    out[j] = refused
  else
    ngone = ngone + 1
    gone[ngone] = pid
    local state = sub(v, 1, 1) -- proc_state
    out[j] = STATE_CODE[state]
    -- The header, and where the payload starts (a value without a
    -- header is all payload, with the header '0': see entry_split).
    local c = find(v, ':', at, true)
    local h = c and sub(v, at, c - 1) or '0'
    local body = c and c + 1 or at
    local id, weight, head = h, 1, nil -- head: h with a ':', for the helpers
    -- One more start, and one more failure: the attempt budget counts
    -- these, not the starts whose holder died or gave the task back.
    local plain = not find(h, ',', 1, true)
    local started -- whether the header counted starts before this one
    if not plain then
      id = entry_id(h)
      started = find(h, ',a', 1, true) ~= nil
      h = header_set(h, 'a', (tonumber(header_get(h, 'a') or '0') or 0) + 1)
      h = header_set(h, 'f', (tonumber(header_get(h, 'f') or '0') or 0) + 1)
      h = header_set(h, 'd', nil)
      head = h .. ':'
      weight = entry_weight(head)
      group_released(head)
    end
    ids[ngone] = id
    extra = extra + weight - 1
    if state ~= 'a' then
      deleted = deleted or state == 'd'
      errors_drop(errors_key, {id})
      if head then release_unique(unique_key, head) end
      freed = freed + weight
    else
      local err = argv[4 * j + 2]
      -- The usual task's fields after its counts (see
      -- first_attempt_fields).
      local fields
      if plain then
        local by = firsts[worker]
        fields = by and by[err] or first_attempt_fields(firsts, ended, worker, err)
      end
      -- No delay ('0', the usual) needs no number made of it.
      local delay = argv[4 * j + 1]
      delay = delay ~= '0' and tonumber(delay) or 0
      if delay > 0 and head and find(h, ',g', 1, true) and sequence_of(head) then
        push(gwait_key, noted(h .. ',d' .. string.format('%x', t_us + delay), id, worker, err, started) .. ':' .. sub(v, body))
        -- Its queue slot is free; a runtime woken finds the group held
        -- until the task is due, and sleeps until then.
        npushed = npushed + 1
        freed = freed + weight
      elseif delay > 0 then
        local due = t_us + delay
        h = h .. (plain and ',a1,f1,d' or ',d') .. string.format('%x', due)
        h = plain and h .. fields or noted(h, id, worker, err, started)
        delayed[#delayed + 1] = ms(due)
        delayed[#delayed + 1] = h .. ':' .. sub(v, body)
        if not first or due < first then first = due end
        freed = freed + weight
      elseif head then
        local entry = noted(h .. due_now, id, worker, err, started) .. ':' .. sub(v, body)
        push(find(h, ',g', 1, true) and gwait_key or list_of(entry, waiting_key), entry)
        npushed = npushed + 1
      else
        -- The usual task: its header is its id, and its ':' and payload
        -- are copied as they are.
        push(waiting_key, id .. first_now .. fields .. (c and sub(v, c) or ':' .. sub(v, at)))
        npushed = npushed + 1
      end
    end
  end
end
if ngone > 0 then
  redis.call('HDEL', procs_key, unpack(gone))
  -- Progress reports are rare: an empty hash, told by one HLEN a call,
  -- spares the HDEL its argument a task.
  if redis.call('HLEN', progress_key) > 0 then
    redis.call('HDEL', progress_key, unpack(ids))
  end
  weight_moved(meta_key, -extra)
end
if nerrs > 0 then
  redis.call('HSET', errors_key, unpack(errs))
end
if #delayed > 0 then
  redis.call('ZADD', delayed_key, unpack(delayed))
  publish(channel, 's' .. ms(first))
end
for list, entries in pairs(pushed) do
  if list == gwait_key then
    group_lib().push(entries)
  else
    redis.call('LPUSH', list, unpack(entries))
  end
end
if npushed > 0 then
  wake(idle_key, channel, npushed)
end
slots_freed(meta_key, waiting_key, idle_key, channel, freed)
groups_settle(idle_key, channel)
-- Only a deleted queue can have lost its name (see take_own_process).
if deleted then
  drop_meta_if_gone(procs_key, meta_key)
end
out[#out + 1] = t_us
return out
