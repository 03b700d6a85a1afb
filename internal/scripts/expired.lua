-- List workers whose registry lease has expired (at most ARGV[1]).
-- KEYS: workers
-- Returns {worker, ...}.
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ms(now_ms()), 'LIMIT', 0, tonumber(ARGV[1]))
