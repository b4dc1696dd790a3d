-- A Kaliper ProfileRun's health, from the conditions the operator keeps for kstatus (Flux) as well:
-- Stalled=True, it failed (or missed its SLO under spec.failIfNotMet): Degraded; Reconciling=True, its trials
-- are running: Progressing, with how many have finished; Ready=True, its report is written: Healthy.
local hs = {}
if obj.status == nil or obj.status.conditions == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator to start the run"
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
  hs.message = latest.Reconciling.message
  if obj.status.progress ~= nil and obj.status.progress.summary ~= nil then
    hs.message = "trials finished: " .. obj.status.progress.summary .. "; " .. hs.message
  end
elseif latest.Ready ~= nil and latest.Ready.status == "True" then
  hs.status = "Healthy"
  hs.message = latest.Ready.message
else
  hs.status = "Progressing"
  hs.message = "Waiting for the Kaliper operator"
end
return hs
