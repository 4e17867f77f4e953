// The one Lua script every gateway runs against the shared limit store, per limited token
// (docs/architecture.md#the-shared-store). Atomic in Redis, on Redis's clock (TIME), so gateways'
// clocks do not matter. KEYS[1]: the token's key prefix. ARGV:
//   1 gateway id, 2 gone ms (a gateway not heard of that long loses its slots and reservations),
//   3 requestsPerMinute (0: none), 4 requests wanted, 5 unused requests given back,
//   6 concurrent (0: none), 7 slots wanted (in all),
//   8 tokensPerMinute (0: none), 9 this gateway's reserved tokens,
//   10 tokensPerDay (0: none), 11 the day (days since 1970, UTC), 12 the tokens this gateway
//   settled in it, 13 when its key expires (ms since 1970: the day's end and a margin),
//   14–17 the same for tokensPerMonth and the month (months since January 1970),
//   18… (unix second, tokens) settled since the last call.
// Returns { requests granted, ms until the next request would be granted (0: now), slots held,
//   tokens of the window counted in all: settled by every gateway plus the others' reservations,
//   places of `concurrent` the other gateways leave, requests GCRA would still grant now (after
//   those granted), tokens of the day and of the month that the other gateways counted (settled
//   and reserved) }.
// A day's or a month's key holds each gateway's total settled in it (a field per gateway, only
// ever raised): a sync that is retried after a lost answer counts nothing twice.
export const SYNC_SCRIPT = `
local k = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local gw = ARGV[1]
local gone = tonumber(ARGV[2])
local rpm, want, back = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local conc, cwant = tonumber(ARGV[6]), tonumber(ARGV[7])
local tpm, myres = tonumber(ARGV[8]), tonumber(ARGV[9])
local keep = 120000
redis.call('ZADD', k .. ':alive', now + gone, gw)
local dead = redis.call('ZRANGEBYSCORE', k .. ':alive', '-inf', now)
for _, d in ipairs(dead) do
  redis.call('HDEL', k .. ':slots', d)
  redis.call('HDEL', k .. ':res', d)
  redis.call('ZREM', k .. ':alive', d)
end
redis.call('PEXPIRE', k .. ':alive', keep)
local granted, waitms, slots, counted, room, left = 0, 0, 0, 0, 0, 0
if rpm > 0 then
  local T = 60000 / rpm
  local tol = (rpm - 1) * T
  local tat = tonumber(redis.call('GET', k .. ':tat') or '0')
  if back > 0 then tat = tat - back * T end
  if tat < now then tat = now end
  local ahead = tat - now
  if ahead <= tol + 0.001 then
    granted = math.min(want, math.floor((tol - ahead) / T + 0.001) + 1)
  end
  tat = tat + granted * T
  if granted < want then waitms = math.max(1, math.ceil(tat - now - tol)) end
  if tat - now <= tol + 0.001 then left = math.floor((tol - (tat - now)) / T + 0.001) + 1 end
  redis.call('SET', k .. ':tat', string.format('%.3f', tat), 'PX', 60000 + keep)
end
if conc > 0 then
  local all = redis.call('HGETALL', k .. ':slots')
  local others = 0
  for i = 1, #all, 2 do
    if all[i] ~= gw then others = others + tonumber(all[i + 1]) end
  end
  room = math.max(0, conc - others)
  slots = math.min(cwant, room)
  redis.call('HSET', k .. ':slots', gw, slots)
  redis.call('PEXPIRE', k .. ':slots', keep)
end
local perday, permonth = tonumber(ARGV[10]), tonumber(ARGV[14])
local others = 0
if tpm > 0 or perday > 0 or permonth > 0 then
  redis.call('HSET', k .. ':res', gw, myres)
  local r = redis.call('HGETALL', k .. ':res')
  for i = 1, #r, 2 do
    if r[i] ~= gw then others = others + tonumber(r[i + 1]) end
  end
  redis.call('PEXPIRE', k .. ':res', keep)
end
local function calendar(limit, key, mine, expires)
  if limit <= 0 then return 0 end
  local cur = tonumber(redis.call('HGET', key, gw) or '0')
  if mine > cur then redis.call('HSET', key, gw, mine) end
  redis.call('PEXPIREAT', key, expires)
  local all = redis.call('HGETALL', key)
  local n = others
  for i = 1, #all, 2 do
    if all[i] ~= gw then n = n + tonumber(all[i + 1]) end
  end
  return n
end
local day = calendar(perday, k .. ':d:' .. ARGV[11], tonumber(ARGV[12]), tonumber(ARGV[13]))
local month = calendar(permonth, k .. ':m:' .. ARGV[15], tonumber(ARGV[16]), tonumber(ARGV[17]))
if tpm > 0 then
  local second = math.floor(now / 1000)
  for i = 18, #ARGV, 2 do redis.call('HINCRBY', k .. ':tpm', ARGV[i], ARGV[i + 1]) end
  local b = redis.call('HGETALL', k .. ':tpm')
  for i = 1, #b, 2 do
    local s = tonumber(b[i])
    if s <= second - 60 then redis.call('HDEL', k .. ':tpm', b[i]) else counted = counted + tonumber(b[i + 1]) end
  end
  counted = counted + others
  redis.call('PEXPIRE', k .. ':tpm', keep)
end
return { granted, waitms, slots, counted, room, left, day, month }
`;

/**
 * A gateway that closes leaves the store: its places of `concurrent` and its reservations go at
 * once (not after the gone time), and its unused lease of requests goes back to GCRA. KEYS[1]: the
 * token's key prefix. ARGV: 1 gateway id, 2 requestsPerMinute (0: none), 3 unused requests.
 */
export const LEAVE_SCRIPT = `
local k = KEYS[1]
local gw = ARGV[1]
local rpm, back = tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('HDEL', k .. ':slots', gw)
redis.call('HDEL', k .. ':res', gw)
redis.call('ZREM', k .. ':alive', gw)
if rpm > 0 and back > 0 then
  local tat = redis.call('GET', k .. ':tat')
  if tat then
    local ttl = redis.call('PTTL', k .. ':tat')
    redis.call('SET', k .. ':tat', string.format('%.3f', tonumber(tat) - back * 60000 / rpm), 'PX', math.max(1, ttl))
  end
end
return 0
`;
