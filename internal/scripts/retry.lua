-- Retry a process's task: record its error, then put it at the back of the
-- queue (no delay) or in the delayed set until now + delay, and wake the
-- queue (or announce the due time). Only the worker that holds the process,
-- while its lease on the queue is live. A task that was cancelled, or whose
-- queue was deleted, is dropped instead: a retry must not bring it back.
-- KEYS: procs, leases, waiting, meta, delayed, errors, idle, unique, high, low
-- ARGV: worker, pid, channel, delay (µs), error ('' for none)
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
set_lists(KEYS[3], KEYS[9], KEYS[10])
local v, refused = take_own_process(KEYS[1], KEYS[2], KEYS[4], ARGV[1], ARGV[2])
if not v then
  return refused
end
local state = proc_state(v)
-- One more start, and one more failure: the attempt budget counts these,
-- not the starts whose holder died or gave the task back.
local h, payload = entry_split(entry_ran(proc_task(v)))
local entry = header_set(h, 'f', (tonumber(header_get(h, 'f') or '0') or 0) + 1) .. ':' .. payload
if state ~= 'a' then
  redis.call('HDEL', KEYS[6], entry_id(entry))
  release_unique(KEYS[8], entry)
  slots_freed(KEYS[4], KEYS[3], KEYS[7], ARGV[3], 1)
  return STATE_CODE[state]
end
if ARGV[5] ~= '' then
  redis.call('HSET', KEYS[6], entry_id(entry), ARGV[5])
end
local delay = tonumber(ARGV[4])
if delay > 0 then
  local due = now_us() + delay
  redis.call('ZADD', KEYS[5], ms(due), entry)
  publish(ARGV[3], 's' .. ms(due))
  slots_freed(KEYS[4], KEYS[3], KEYS[7], ARGV[3], 1)
else
  redis.call('LPUSH', list_of(entry, KEYS[3]), entry)
  publish(ARGV[3], 'w1')
end
return 1
