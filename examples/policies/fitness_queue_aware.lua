-- fitness_queue_aware: Allen's multiplicative fitness with a steeper
-- queue penalty, for clusters where a busy device hurts latency more than
-- a fuller one costs space.
--
--   terrace policy put fit examples/policies/fitness_queue_aware.lua --hook fitness
--   terrace policy test fit --what-if n1/ssd0.queue=80
--
-- fitness(device, cluster) returns a weight >= 0; placement samples
-- devices in proportion (two-choice by default) among those the rules
-- allow (tier, up, distinct nodes, under 95 % full).

params = {
  aggression = 1.1,   -- a in t_u = 1/a^u, u in percent (the built-in default)
  queue_ceil = 32,    -- q_ceil: a device with 32 operations in flight gets t_q = 0
  selection = "two-choice",
}

function fitness(d, cluster)
  local t_u = params.aggression ^ (-100 * d.usage)
  local t_q = 1 - d.queue / params.queue_ceil
  if t_q < 0 then t_q = 0 end
  -- square the queue term: twice as busy is four times less attractive
  return t_u * t_q * t_q
end
