-- A Kaliper ModelDeployment's health, from the conditions the operator keeps for kstatus (Flux) as well:
-- Stalled=True, its rollout is stuck or its spec cannot be deployed: Degraded; Reconciling=True, a rollout is
-- under way: Progressing; Ready=True, every replica of the current spec is available: Healthy.
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator to deploy this spec"
  return hs
end
local latest = {}
for _, condition in ipairs(obj.status.conditions) do
  latest[condition.type] = condition
end
if latest.Stalled ~= nil and latest.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = latest.Stalled.message
elseif latest.Ready ~= nil and latest.Ready.status == "True" then
  hs.status = "Healthy"
  hs.message = latest.Ready.message
else
  hs.status = "Progressing"
  hs.message = obj.status.message or "Waiting for the rollout"
end
return hs
