-- wrk script: POST one JSON body over and over (keep-alive), then print the
-- latency distribution as one JSON line for bench/run_http.py.
--   wrk -s post.lua http://127.0.0.1:8888/filter -- body.json
local req

function init(args)
  local f = assert(io.open(args[1], "rb"))
  local body = f:read("*a")
  f:close()
  req = wrk.format("POST", nil, { ["Content-Type"] = "application/json" }, body)
end

function request()
  return req
end

-- done(): the JSON report line, shared with the other script.
dofile((debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "report.lua")
