#!lua name=floor
-- The least server-side work the pipeline bar's guarantees can cost, as
-- Functions with no argument checks, no preflight, no summary and no run
-- status: what no implementation of issue 29's contract can go below on a
-- server whose only atomic conditional write is a Function (Redis 7.0-8.2,
-- Valkey 8.0-9.1). bench/floor/run measures them beside the plain commands
-- the hand-written chain sends instead.

-- A deduplicated hand-off: KEYS = [ready, marker per child], ARGV = [the
-- children's packed envelopes]. Each child is appended once, whatever
-- redelivery of its parent repeats the call.
redis.register_function('handoff', function(keys, args)
  local appended = 0
  for i = 2, #keys do
    if redis.call('SET', keys[i], '1', 'NX', 'PX', '3600000') then
      redis.call('XADD', keys[1], '*', 'packed', args[i - 1])
      appended = appended + 1
    end
  end
  return appended
end)

-- Idempotent fan-in for a batch of jobs of one run: KEYS = [run], ARGV =
-- [job IDs]. Each job is recorded once and counted down once, whatever
-- redelivery repeats it.
redis.register_function('settle', function(keys, args)
  local left = 0
  for i = 1, #args do
    if redis.call('HSETNX', keys[1], args[i], 'done') == 1 then
      left = redis.call('HINCRBY', keys[1], 'left', -1)
    end
  end
  return left
end)
