-- Enqueue the task of one tick of a periodic schedule, at most once per
-- tick across the fleet. Every worker that runs the schedule calls this at
-- each tick, with no leader: the queue's periodic hash keeps, per schedule
-- name, the last tick enqueued, and a task is added only for a tick later
-- than that one and not later than now. So any number of workers calling
-- it for the same tick add one task, and a tick is never enqueued early.
-- Tick 0 only reads the record, first setting it to now for a schedule
-- never seen, so that a new schedule has no missed ticks to catch up.
-- The task goes to the back of the queue, as enqueue.lua puts it, with an
-- id and a work event; the ticks hash keeps its id and the tick after it
-- ('<id>,<next ms>', or '<id>' when next is unknown), for inspection: the
-- schedule itself lives in the workers, so Redis learns its next tick from
-- the worker that enqueued the last one (or that registered it, for a
-- schedule with no tick yet).
-- Returns {status, last tick (ms), now (µs), task id or '', unregistered
-- (0/1)}, all as strings: status 1 when the task was added (last is then
-- the tick), 0 when the tick was not later than the last one enqueued
-- (or tick 0), 2 when the tick is later than now (nothing changed).
-- unregistered is as enqueue.lua's.
local waiting_key, meta_key, idle_key = KEYS[1], KEYS[2], KEYS[3]
local periodic_key, stats_key, retained_key, ticks_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local channel, queue, schedule = ARGV[1], ARGV[2], ARGV[3] -- queue, schedule: their names
local tick = tonumber(ARGV[4]) -- ms, Redis clock; 0: read
-- The task's header fields (',m<budget>,t<timeout ms>,R<retain ms>,w<weight>',
-- each if set; '' for none), and its payload.
local fields, payload = ARGV[5], ARGV[6]
local next_tick = tonumber(ARGV[7]) or 0 -- ms, the schedule's tick after this one (after now for a read); 0: unknown

-- The ticks hash's record of the schedule: its last task's id, and the
-- tick after it when known.
local function note_ticks(id)
  if next_tick > 0 then id = id .. ',' .. ms(next_tick) end
  redis.call('HSET', ticks_key, schedule, id)
end

local now = now_us()
local last = tonumber(redis.call('HGET', periodic_key, schedule) or '-1')
if tick == 0 then
  if last < 0 then
    last = math.floor(now / 1000)
    redis.call('HSET', periodic_key, schedule, ms(last))
  end
  if next_tick > 0 then
    local id = redis.call('HGET', ticks_key, schedule) or ''
    note_ticks((string.gsub(id, ',.*', '')))
  end
  return {'0', ms(last), ms(now), '', '0'}
end
if tick <= last then
  return {'0', ms(last), ms(now), '', '0'}
end
if tick * 1000 > now then
  return {'2', ms(math.max(last, 0)), ms(now), '', '0'}
end
redis.call('HSET', periodic_key, schedule, ms(tick))
local id = string.format('%x', next_task_ids(meta_key, 1))
redis.call('LPUSH', waiting_key, id .. fields .. ':' .. payload)
note_ticks(id)
if string.find(fields, ',R', 1, true) then
  outcome_pending(retained_key, {id})
end
wake(idle_key, channel, 1)
stat('e', 1)
stats_flush(stats_key)
return {'1', ms(tick), ms(now), id, tostring(ensure_queue(meta_key, queue))}
