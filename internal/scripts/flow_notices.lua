-- List a queue's workflow notices (flow_notice in common/workflows.lua)
-- written at least age ms ago, oldest first, up to limit: those a worker
-- should have carried to their workflows by now, for the sweep to carry
-- again.
local flows_key = KEYS[1]
local age, limit = tonumber(ARGV[1]), tonumber(ARGV[2])

return redis.call('ZRANGEBYSCORE', flows_key, '-inf', ms(now_us() - age * 1000), 'LIMIT', 0, limit)
