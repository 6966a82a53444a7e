-- rule_spread_racks: a planner rule scoring an egroup's replica set.
--
--   terrace policy put spread examples/policies/rule_spread_racks.lua
--   terrace policy test spread
--
-- cost(view) returns a number: +inf (math.huge) violates a hard
-- constraint, larger is worse, negative is an affinity. view has scope,
-- params, cluster {now, nodes, racks, tiers}, egroup {id, size, reads,
-- atime, mtime, vector, replicas, tiers} and replicas (the candidate set:
-- {device, node, tier, rack, usage, queue, state}).

scope = "replica-set"
params = { same_rack_cost = 10, full_device = 0.9 }

function cost(view)
  local nodes, racks = {}, {}
  local c = 0
  for _, r in ipairs(view.replicas or {}) do
    if nodes[r.node] then
      return math.huge                -- two replicas on one node: never
    end
    nodes[r.node] = true
    if r.rack ~= nil and racks[r.rack] and view.cluster.racks > 1 then
      c = c + params.same_rack_cost   -- shared rack: allowed, discouraged
    end
    if r.rack ~= nil then racks[r.rack] = true end
    if r.usage ~= nil and r.usage > params.full_device then
      c = c + 100 * (r.usage - params.full_device)
    end
  end
  return c
end

-- hints tell the solver where to look first.
function hints(view)
  return { { kind = "prefer-distinct", target = "rack", weight = 1 } }
end
