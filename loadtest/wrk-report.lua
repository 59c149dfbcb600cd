-- wrk's done() hook: print one JSON line with wrk's own counts and its
-- microsecond latency histogram's percentiles, for loadtest/wrk.js to parse.
-- wrk records latency per request in µs from the socket write to the parsed
-- response; its percentiles are exact to that resolution.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '\nTUNEKIT_WRK {"durationUs":%d,"requests":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latencyUs":{"min":%d,"mean":%.1f,"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"curve":[',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.mean,
    latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency:percentile(99.9), latency.max))
  local pcts = { 0, 10, 25, 50, 75, 90, 95, 98, 99, 99.5, 99.8, 99.9, 99.95, 99.99, 99.999 }
  for i, p in ipairs(pcts) do
    local v = p == 0 and latency.min or latency:percentile(p)
    io.write(string.format('[%s,%d],', tostring(p), v))
  end
  io.write(string.format('[100,%d]]}}\n', latency.max))
end
