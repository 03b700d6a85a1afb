-- Enqueue the task of one tick of a periodic schedule, at most once per
-- tick across the fleet. Every worker that runs the schedule calls this at
-- each tick, with no leader: the queue's periodic hash keeps, per schedule
-- name, the last tick enqueued, and a task is added only for a tick later
-- than that one and not later than now. So any number of workers calling
-- it for the same tick add one task, and a tick is never enqueued early.
-- Tick 0 only reads the record, first setting it to now for a schedule
-- never seen, so that a new schedule has no missed ticks to catch up.
-- The task goes to the back of the queue, as enqueue.lua puts it, with an
-- id and a work event.
-- KEYS: waiting, meta, idle, periodic, stats, retained
-- ARGV: channel, queue name, schedule name, tick (ms, Redis clock; 0:
--       read), header fields (',m<budget>,t<timeout ms>,R<retain ms>,w<weight>', or
--       ''), payload
-- Returns {status, last tick (ms), now (µs), task id or '', unregistered
-- (0/1)}, all as strings: status 1 when the task was added (last is then
-- the tick), 0 when the tick was not later than the last one enqueued
-- (or tick 0), 2 when the tick is later than now (nothing changed).
-- unregistered is as enqueue.lua's.
local now = now_us()
local tick = tonumber(ARGV[4])
local last = tonumber(redis.call('HGET', KEYS[4], ARGV[3]) or '-1')
if tick == 0 then
  if last < 0 then
    last = math.floor(now / 1000)
    redis.call('HSET', KEYS[4], ARGV[3], ms(last))
  end
  return {'0', ms(last), ms(now), '', '0'}
end
if tick <= last then
  return {'0', ms(last), ms(now), '', '0'}
end
if tick * 1000 > now then
  return {'2', ms(math.max(last, 0)), ms(now), '', '0'}
end
redis.call('HSET', KEYS[4], ARGV[3], ms(tick))
local id = string.format('%x', next_task_ids(KEYS[2], 1))
redis.call('LPUSH', KEYS[1], id .. ARGV[5] .. ':' .. ARGV[6])
if string.find(ARGV[5], ',R', 1, true) then
  outcome_pending(KEYS[6], {id})
end
wake(KEYS[3], ARGV[1], 1)
stat('e', 1)
stats_flush(KEYS[5])
return {'1', ms(tick), ms(now), id, tostring(ensure_queue(KEYS[2], ARGV[2]))}
