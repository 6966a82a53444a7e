-- balancer_mantle: a Mantle-style balancer for the Curator's scans.
--
--   terrace policy put balancer examples/policies/balancer_mantle.lua
--   terrace policy test balancer
--   terrace curator status --json     (partitions: which node scans what)
--
-- nodes:  { id, up, rack, conns, queue, used, capacity, usage, devices,
--           partitions (scanned now), records (scanned at the last job), self }
-- units:  { name ("egroups/3"), records, node }   -- the scan partitions
--
-- when() decides whether to rebalance, where() the target share of each
-- node, howmuch() (optional) which units go where. Without howmuch the
-- biggest units are dealt first to the node furthest below its share.

-- load is what a node is busy with: client I/O in flight plus connections.
local function load(n)
  return n.queue + n.conns
end

function when(nodes, units, self)
  local up, owners = 0, 0
  for _, n in ipairs(nodes) do
    if n.up then up = up + 1 end
    if n.up and n.partitions > 0 then owners = owners + 1 end
  end
  -- Rebalance when scanning sits on fewer nodes than are up.
  return up > 1 and owners < up
end

function where(nodes, units, self)
  local targets = {}
  for _, n in ipairs(nodes) do
    if n.up then
      -- Busy nodes get a smaller share; the master keeps less since it
      -- also joins, decides and executes.
      local share = 1 / (1 + load(n))
      if n.self then share = share / 2 end
      targets[n.id] = share
    end
  end
  return targets
end
