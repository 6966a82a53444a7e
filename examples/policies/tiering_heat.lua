-- tiering_heat: when and what to tier.
--
--   terrace policy put tiering examples/policies/tiering_heat.lua
--   terrace policy test tiering --what-if tier:ssd.used=85%
--
-- tiering(tiers, cluster) returns thresholds (any subset of down_above,
-- dest_below, reduce, balance_mean, balance_spread, promote_reads,
-- max_moves) and run=false to skip tiering this time. heat(egroup, now)
-- orders egroups: the lowest heat is demoted first.

function tiering(tiers, cluster)
  local ssd = tiers.ssd
  if ssd == nil then
    return { run = false }          -- nothing to tier down from
  end
  if ssd.queue > 4 * ssd.devices then
    return { run = false }          -- the fast tier is busy with clients: wait
  end
  -- Demote earlier than the default 75 %, and shed more each time, so
  -- the ssd keeps room for bursts of writes.
  return { down_above = 0.65, reduce = 0.20, promote_reads = 5 }
end

-- Recent reads count most; an egroup untouched for a day is cold however
-- often it was read before.
function heat(eg, now)
  local age_hours = (now - math.max(eg.atime, eg.mtime)) / 3600
  return eg.reads * 10 - age_hours
end
