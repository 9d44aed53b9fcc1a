-- Shared by the wrk scripts: print wrk's summary and latency distribution as
-- one JSON line for bench/run_http.py. Loaded with dofile from the script's
-- own directory.
function done(summary, latency, requests)
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"non2xx":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"max_us":%d,"mean_us":%.1f}\n',
    summary.requests, summary.duration,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, latency.mean))
end
