-- Requeue every dead letter of a queue, as dead_requeue.lua does one, 1,000
-- at a time: they join the back of the queue in the order they died (the
-- oldest first out), and one work event announces them all.
-- KEYS: dead, errors, waiting, meta, idle, high, low, stats, results,
--       retained
-- ARGV: channel, queue name
-- Returns {requeued, unregistered (0/1)}: unregistered as in enqueue.lua,
-- when the caller must register the queue.
set_lists(KEYS[3], KEYS[6], KEYS[7])
local n = 0
while true do
  local chunk = redis.call('ZRANGE', KEYS[1], 0, 999)
  if #chunk == 0 then
    break
  end
  local entries, ids = {}, {}
  for i, e in ipairs(chunk) do
    entries[i] = dead_revived(e)
    ids[i] = entry_id(e)
  end
  redis.call('ZREM', KEYS[1], unpack(chunk))
  redis.call('HDEL', KEYS[2], unpack(ids))
  dead_outcome_cleared(KEYS[9], KEYS[10], chunk)
  -- LPUSH puts the first given nearest the front (the right end).
  for _, e in ipairs(entries) do
    redis.call('LPUSH', list_of(e, KEYS[3]), e)
  end
  n = n + #chunk
end
if n == 0 then
  return {0, 0}
end
wake(KEYS[5], ARGV[1], n)
stat('q', n)
stats_flush(KEYS[8])
return {n, ensure_queue(KEYS[4], ARGV[2])}
