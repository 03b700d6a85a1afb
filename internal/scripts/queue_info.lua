-- Read a queue's counts and controls at one instant (a pipeline of reads
-- could see the weight counter and the processes at different times).
-- Returns {waiting (every level), delayed, in flight, dead, paused (0/1),
--          limit, rate, per (ms), extra weight in flight ('wx')}: 0 for a
--          control that is not set.
local waiting_key, delayed_key, procs_key, dead_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local meta_key, high_key, low_key = KEYS[5], KEYS[6], KEYS[7]

set_lists(waiting_key, high_key, low_key)
local paused, limit, rate, per, extra = queue_controls(meta_key)
return {waiting_len(waiting_key), redis.call('ZCARD', delayed_key), redis.call('HLEN', procs_key),
  redis.call('ZCARD', dead_key), paused and 1 or 0, limit or 0, rate or 0, per or 0, extra}
