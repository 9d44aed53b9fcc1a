-- wrk script: what kube-scheduler sends for each pod, in order: filter, then
-- prioritize over the names filter passed (in its order, as kube-scheduler
-- does), then bind to one of them. Pods rotate over
-- 1,000 UIDs (bench-pod-0 .. bench-pod-999): the first round assumes GPUs, later
-- rounds re-bind a pod to the node it already holds (idempotent).
--   wrk -t1 -c1 -s sequence.lua http://127.0.0.1:8888 -- filter.json names.txt
-- One connection per wrk thread: the script follows one pod at a time.
-- Latency is per request (each of the three counts); run_http.py reports
-- sequences/s = requests/s / 3.
local parts = {}                -- the filter body around the pod's name and UID
local names = {}
local passed = nil              -- filter's answer: '"NodeNames":[...]'
local step, pod = 0, 0
local PODS = 1000

local function split(body)
  -- The generated body names the pod "bench-0", then gives its UID "bench-pod-0".
  local a1, b1 = body:find('"bench%-0"', 1)
  local a2, b2 = body:find('"bench%-pod%-0"', b1 + 1)
  assert(a1 and a2, "the body does not name pod bench-0 with UID bench-pod-0")
  return { body:sub(1, a1 - 1), body:sub(b1 + 1, a2 - 1), body:sub(b2 + 1) }
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  local body = f:read("*a")
  f:close()
  parts = split(body)
  for line in io.lines(args[2]) do
    names[#names + 1] = line
  end
end

local headers = { ["Content-Type"] = "application/json" }

function request()
  local r
  if step < 2 then
    local body = parts[1] .. '"bench-' .. pod .. '"' .. parts[2] .. '"bench-pod-' .. pod .. '"' ..
                 parts[3]
    if step == 1 and passed then
      -- The same pod, over the names its filter passed.
      local a, b = body:find('"NodeNames":%b[]')
      body = body:sub(1, a - 1) .. passed .. body:sub(b + 1)
    end
    r = wrk.format("POST", step == 0 and "/filter" or "/prioritize", headers, body)
  else
    r = wrk.format("POST", "/bind", headers, string.format(
      '{"PodName":"bench-%d","PodNamespace":"ml","PodUID":"bench-pod-%d","Node":"%s"}',
      pod, pod, names[(pod % #names) + 1]))
    pod = (pod + 1) % PODS
  end
  step = (step + 1) % 3
  return r
end

function response(status, headers, body)
  -- After a filter (the next step is prioritize): keep the names it passed.
  if step == 1 then
    local a, b = body:find('"NodeNames":%b[]')
    passed = a and body:sub(a, b) or nil
  end
end

-- done(): the JSON report line, shared with the other script.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "report.lua")
