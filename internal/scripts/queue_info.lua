-- Read a queue's counts and controls at one instant (a pipeline of reads
-- could see the weight counter and the processes at different times).
-- KEYS: waiting, delayed, procs, dead, meta, high, low
-- Returns {waiting (every level), delayed, in flight, dead, paused (0/1),
--          limit, rate, per (ms), extra weight in flight ('wx')}: 0 for a
--          control that is not set.
set_lists(KEYS[1], KEYS[6], KEYS[7])
local paused, limit, rate, per, extra = queue_controls(KEYS[5])
return {waiting_len(KEYS[1]), redis.call('ZCARD', KEYS[2]), redis.call('HLEN', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), paused and 1 or 0, limit or 0, rate or 0, per or 0, extra}
