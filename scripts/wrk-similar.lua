-- wrk script of scripts/bench-serve: GET /v1/{index}/similar/{id} for the ids in the file
-- $NEARDUP_IDS (one per line), taken in turn; $NEARDUP_QUERY is appended (e.g. "?k=3").
-- At the end it prints one line: requests, requests/s, p50/p90/p99 in ms, errors.
local ids = {}
for line in io.lines(os.getenv("NEARDUP_IDS")) do
  if line ~= "" then ids[#ids + 1] = line end
end
local index = os.getenv("NEARDUP_INDEX")
local query = os.getenv("NEARDUP_QUERY") or ""
local function escape(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", string.byte(c)) end))
end
local paths = {}
for i, id in ipairs(ids) do
  paths[i] = "/v1/" .. escape(index) .. "/similar/" .. escape(id) .. query
end
local n = 0
request = function()
  n = n % #paths + 1
  return wrk.format("GET", paths[n])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "wrk-result requests=%d seconds=%.3f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f non2xx=%d socket_errors=%d\n",
    summary.requests, summary.duration / 1e6,
    latency:percentile(50) / 1e3, latency:percentile(90) / 1e3, latency:percentile(99) / 1e3,
    e.status, e.connect + e.read + e.write + e.timeout))
end
