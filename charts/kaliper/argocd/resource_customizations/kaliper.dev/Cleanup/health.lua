-- A Kaliper Cleanup's health, from the conditions the operator keeps for kstatus (Flux) as well:
-- Stalled=True, its pass was refused or failed: Degraded; Ready=True, its pass is done or it waits for the
-- next one on its schedule: Healthy; before its first pass: Progressing.
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator to run a pass"
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
  hs.message = "Waiting for the Kaliper operator"
end
return hs
