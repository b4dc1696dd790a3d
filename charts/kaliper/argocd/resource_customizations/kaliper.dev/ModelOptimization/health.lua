-- A Kaliper ModelOptimization's health, from the conditions the operator keeps for kstatus (Flux) as well:
-- Stalled=True, the optimization failed: Degraded; Reconciling=True, its optimizer Job is running:
-- Progressing, with the optimizer's latest progress line; Ready=True, a model was chosen: Healthy.
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator to start the optimizer"
  return hs
end
local latest = {}
for _, condition in ipairs(obj.status.conditions) do
  latest[condition.type] = condition
end
if latest.Stalled ~= nil and latest.Stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = latest.Stalled.message
elseif latest.Reconciling ~= nil and latest.Reconciling.status == "True" then
  hs.status = "Progressing"
  hs.message = obj.status.message or latest.Reconciling.message
elseif latest.Ready ~= nil and latest.Ready.status == "True" then
  hs.status = "Healthy"
  hs.message = latest.Ready.message
else
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator"
end
return hs
