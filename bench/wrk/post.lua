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

function done(summary, latency, requests)
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean))
end
