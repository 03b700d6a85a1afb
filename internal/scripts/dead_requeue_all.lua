-- Requeue every dead letter of a queue, as dead_requeue.lua does one, 1,000
-- at a time: they join the back of the queue in the order they died (the
-- oldest first out), and one work event announces them all.
-- Returns {requeued, unregistered (0/1)}: unregistered as in enqueue.lua,
-- when the caller must register the queue.
local dead_key, errors_key, waiting_key, meta_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local idle_key, high_key, low_key, stats_key = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local results_key, retained_key, gwait_key, gready_key = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local flows_key, glimits_key = KEYS[13], KEYS[14] -- workflow tasks' notices (see flow_notice); see GROUPS in common/waiting.lua
local channel, queue = ARGV[1], ARGV[2] -- queue: its name

set_lists(waiting_key, high_key, low_key, gwait_key, gready_key, nil, glimits_key)
local n = 0
while true do
  local chunk = redis.call('ZRANGE', dead_key, 0, 999)
  if #chunk == 0 then
    break
  end
  local entries, ids = {}, {}
  for i, e in ipairs(chunk) do
    entries[i] = dead_revived(e)
    ids[i] = entry_id(e)
  end
  redis.call('ZREM', dead_key, unpack(chunk))
  errors_drop(errors_key, ids)
  dead_letters_gone(meta_key, chunk)
  dead_outcome_cleared(results_key, retained_key, chunk)
  -- LPUSH puts the first given nearest the front (the right end).
  for _, e in ipairs(entries) do
    push_waiting(e, waiting_key)
    flow_notice(flows_key, e, 'revived')
  end
  n = n + #chunk
end
if n == 0 then
  return {0, 0}
end
wake(idle_key, channel, n)
stat('q', n)
stats_flush(stats_key)
return {n, ensure_queue(meta_key, queue)}
