-- Remove a worker from the registry. A reclaimer (mode "expired") calls this
-- only after every queue in the worker's set was released, and it refuses
-- while the lease is live; the worker itself uses mode "force".
-- A removed worker's reclaim claim (see expired.lua) goes with it.
-- KEYS: workers, worker's queue set, reclaiming
-- ARGV: worker, mode ("expired" | "force")
-- Returns 1 when removed, -1 when refused.
if ARGV[2] == 'expired' and lease_live(KEYS[1], ARGV[1], now_ms()) then
  return -1
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[2])
return 1
