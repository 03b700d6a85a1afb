-- Move a process's task to the queue's dead letters, with when, which
-- worker and the kind of failure in its header and the error in the errors
-- hash; then trim the dead letters to their bounds (oldest first), with
-- their errors. Only the worker that holds the process, while its lease on
-- the queue is live. A cancelled task, or one of a deleted queue, is
-- dropped instead.
-- A task that asked for it keeps its outcome too (see retain).
-- KEYS: procs, leases, meta, dead, errors, results, retained, waiting,
--       idle, unique, high, low, progress, stats
-- ARGV: worker, pid, kind, error, max count, max age (ms), channel
-- Returns -1 lease gone, 0 not owned (lost), else the code of the state it
-- had: 1 active, 2 cancelled, 3 deleted.
set_lists(KEYS[8], KEYS[11], KEYS[12])
local v, refused = take_own_process(KEYS[1], KEYS[2], KEYS[3], KEYS[13], ARGV[1], ARGV[2])
if not v then
  return refused
end
local state = proc_state(v)
local entry = proc_task(v)
local id = entry_id(entry)
release_unique(KEYS[10], entry)
slots_freed(KEYS[3], KEYS[8], KEYS[9], ARGV[7], entry_weight(entry))
if state ~= 'a' then
  redis.call('HDEL', KEYS[5], id)
  return STATE_CODE[state]
end
local now = now_ms()
retain(KEYS[6], KEYS[7], ARGV[7], entry, 'dead', ARGV[2], 1, ARGV[4], ARGV[3])
local h, payload = entry_split(entry_ran(entry))
h = header_set(header_set(header_set(h, 'D', ms(now)), 'W', ARGV[1]), 'K', ARGV[3])
redis.call('ZADD', KEYS[4], ms(now), h .. ':' .. payload)
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[5], id, ARGV[4])
end
trim_dead(KEYS[4], KEYS[5], tonumber(ARGV[5]), now - tonumber(ARGV[6]))
stat('d', 1)
if STATS then stat_run(now_us() - (tonumber(ARGV[2], 16) or 0)) end
stats_flush(KEYS[14])
return 1
