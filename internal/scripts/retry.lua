-- Retry processes' tasks: record each one's error, then put it at the back
-- of the queue (no delay) or in the delayed set until now + delay, and
-- wake the queue (one work event for all that went back at once, naming
-- parked runtimes as an enqueue's does: see wake) or announce the earliest
-- due time. Each only if it still belongs to its
-- worker and that worker's lease on the queue is live. A task that was
-- cancelled, or whose queue was deleted, is dropped instead: a retry must
-- not bring it back. Retry calls that overlap are sent as one script call
-- (see coalesce.go), so it takes many, as finish.lua does. The task's
-- progress report, if any, goes with its process, and a weighted task's
-- slots (see entry_weight) with it. A retried task notes when it became
-- due again (see entry_due) for the wait stats; the client counts it
-- ('r', and its run time, from the clock this returns), as finish.lua's.
-- KEYS: procs, leases, waiting, meta, delayed, errors, idle, unique, high,
--       low, progress, stats
-- ARGV: channel, stats counted by the client ('' for none: see
--       stats_add), then per process: worker, pid, delay (µs), error (''
--       for none)
-- Returns one code per process: -1 lease gone, 0 not owned (lost), else
-- the code of the state it had: 1 active, 2 cancelled, 3 deleted; then the
-- Redis clock (µs).
set_lists(KEYS[3], KEYS[9], KEYS[10])
local channel = ARGV[1]
local t_us, now, pids, vals = batch_open(KEYS[1], KEYS[12], KEYS[4], 4)
local live, taken, gone, ids, out = {}, {}, {}, {}, {}
local errs, pushed, delayed = {}, {}, {}
local npushed, freed, first = 0, 0, nil
local extra = 0 -- the extra weight of the processes removed
local deleted = false
for j, pid in ipairs(pids) do
  local worker, v = ARGV[4 * j - 1], vals[j]
  local refused = batch_refusal(KEYS[2], now, live, taken, worker, pid, v)
  if refused then
    out[j] = refused
  else
    gone[#gone + 1] = pid
    local state = proc_state(v)
    out[j] = STATE_CODE[state]
    -- One more start, and one more failure: the attempt budget counts
    -- these, not the starts whose holder died or gave the task back. (What
    -- entry_ran does, with the payload copied once, not three times.)
    local h, payload = entry_split(proc_task(v))
    h = header_set(h, 'a', (tonumber(header_get(h, 'a') or '0') or 0) + 1)
    h = header_set(h, 'f', (tonumber(header_get(h, 'f') or '0') or 0) + 1)
    local entry = h .. ':' .. payload
    local id = entry_id(h)
    ids[#ids + 1] = id
    local weight = entry_weight(entry)
    extra = extra + weight - 1
    if state ~= 'a' then
      deleted = deleted or state == 'd'
      redis.call('HDEL', KEYS[6], id)
      release_unique(KEYS[8], entry)
      freed = freed + weight
    else
      local err = ARGV[4 * j + 2]
      if err ~= '' then
        errs[#errs + 1] = id
        errs[#errs + 1] = err
      end
      local delay = tonumber(ARGV[4 * j + 1]) or 0
      if delay > 0 then
        local due = t_us + delay
        entry = entry_due(entry, due)
        delayed[#delayed + 1] = ms(due)
        delayed[#delayed + 1] = entry
        if not first or due < first then first = due end
        freed = freed + weight
      else
        entry = entry_due(entry, t_us)
        local list = list_of(entry, KEYS[3])
        pushed[list] = pushed[list] or {}
        table.insert(pushed[list], entry)
        npushed = npushed + 1
      end
    end
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[11], unpack(ids))
  weight_moved(KEYS[4], -extra)
end
if #errs > 0 then
  redis.call('HSET', KEYS[6], unpack(errs))
end
if #delayed > 0 then
  redis.call('ZADD', KEYS[5], unpack(delayed))
  publish(channel, 's' .. ms(first))
end
for list, entries in pairs(pushed) do
  redis.call('LPUSH', list, unpack(entries))
end
if npushed > 0 then
  wake(KEYS[7], channel, npushed)
end
slots_freed(KEYS[4], KEYS[3], KEYS[7], channel, freed)
-- Only a deleted queue can have lost its name (see take_own_process).
if deleted then
  drop_meta_if_gone(KEYS[1], KEYS[4])
end
out[#out + 1] = t_us
return out
