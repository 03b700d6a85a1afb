-- Retry processes at once (no delay), as retry.lua does, for the tasks
-- that need nothing of retry.lua's other work: an active process whose
-- task has no weight, group or priority (no 'w', 'g' or 'p' field) goes
-- to the back of the normal list with one more start and one more
-- failure and its due time, its error and attempt recorded in its entry
-- (see attempt_added) and its progress report removed, as retry.lua would
-- put it. If any process is
-- not such (cancelled, of a deleted queue, or a task with one of those
-- fields), it writes nothing and answers 5 for every process, for the
-- caller (internal/store's Retry) to send the whole batch to retry.lua:
-- one call writes, so a failure of the second cannot leave a batch half
-- retried. It carries none of retry.lua's group, priority,
-- delay, unique-key or slot helpers: a script runs its whole text,
-- helpers included, on every call, and a retry at once of a plain task
-- is the usual one.
-- Returns one code per process: -1 lease gone, 0 not owned (lost), 1
-- retried; or 5 for every one, all left for retry.lua; then the Redis
-- clock (µs).
local procs_key, leases_key, waiting_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local errors_key, idle_key, progress_key, stats_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local channel, counts = ARGV[1], ARGV[2] -- counts: stats counted by the client ('' for none: see stats_add)
-- Then per process j, ARGV[3j...3j + 2]: worker, pid, error ('' for none).

local t_us, now, pids, vals = batch_open(procs_key, stats_key, meta_key, counts, 3)
local live, taken, out = {}, {}, {}
local gone, ids, errs, entries = {}, {}, {}, {}
local ngone, nerrs = 0, 0
local find, sub = string.find, string.sub
local at = 2 + OWNER_LEN -- where a record's entry starts (see proc_task)
local argv = ARGV -- its tail, read per process (a local is quicker to index)
local due_now = ',d' .. string.format('%x', t_us) -- see entry_due
local first_now = ',a1,f1' .. due_now -- the usual task's fields: see retry.lua
local ended = math.floor(t_us / 1000)
local firsts = {} -- see first_attempt_fields
for j = 1, #pids do
  local pid, v, worker = pids[j], vals[j], argv[3 * j]
  local refused = batch_refusal(leases_key, now, live, taken, worker, pid, v)
  local c, h, comma
  if not refused then
    c = find(v, ':', at, true)
    h = c and sub(v, at, c - 1) or '0'
    comma = find(h, ',', 1, true)
  end
  if refused then
    out[j] = refused
  elseif sub(v, 1, 1) ~= 'a' or comma and find(h, ',[wgp]') then
    for k = 1, #pids do
      out[k] = 5
    end
    out[#pids + 1] = t_us
    return out
  else
    out[j] = 1
    local err = argv[3 * j + 2]
    local id, entry, field, older
    if comma then
      -- Fields that change nothing here (a count of starts, a kind, a
      -- budget...): the header rewritten as retry.lua rewrites it.
      id = sub(h, 1, comma - 1) -- see entry_id
      local a = header_get(h, 'a')
      h = header_set(h, 'a', (tonumber(a or '0') or 0) + 1)
      h = header_set(h, 'f', (tonumber(header_get(h, 'f') or '0') or 0) + 1)
      h = header_set(h, 'd', nil)
      h, field, older = attempt_added(errors_key, id, h .. due_now, ended, 'r', worker, err, a ~= nil)
      entry = h .. ':' .. sub(v, c + 1)
      if field then
        errs[nerrs + 1], errs[nerrs + 2] = field, older
        nerrs = nerrs + 2
      end
    else
      id = h
      local by = firsts[worker]
      entry = id .. first_now .. (by and by[err] or first_attempt_fields(firsts, ended, worker, err)) .. (c and sub(v, c) or ':' .. sub(v, at))
    end
    ngone = ngone + 1
    gone[ngone], ids[ngone], entries[ngone] = pid, id, entry
  end
end
if ngone > 0 then
  redis.call('HDEL', procs_key, unpack(gone))
  -- Progress reports are rare: an empty hash, told by one HLEN a call,
  -- spares the HDEL its argument a task.
  if redis.call('HLEN', progress_key) > 0 then
    redis.call('HDEL', progress_key, unpack(ids))
  end
  if nerrs > 0 then
    redis.call('HSET', errors_key, unpack(errs))
  end
  redis.call('LPUSH', waiting_key, unpack(entries))
  wake(idle_key, channel, ngone)
end
out[#out + 1] = t_us
return out
