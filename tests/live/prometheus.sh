#!/bin/bash
# live.prometheus: a real Prometheus (Debian's prometheus package, started
# here with its own config and data folder, stopped at the end) scrapes
# `memsnap run --metrics 127.0.0.1:PORT` every second over climb on the
# simulated device: 32 MiB more every 100 ms for 6 s, then held 4 s.
#   - what the endpoint serves passes `promtool check metrics`, and any
#     other path gets 404;
#   - max_over_time(memsnap_reserved_bytes[5m]) over the HTTP API equals
#     `memsnap summary`'s peak of reserved within one step of the climb
#     (the peak lasts a moment; Prometheus samples once a second), and the
#     peak metric equals it to the byte;
#   - the series carry the program's pid and this host (and no rank: the
#     program has no $RANK, and Prometheus drops an empty label).
. "$(dirname "$0")/lib.sh"
for t in prometheus promtool curl jq python3; do
    command -v $t > /dev/null || skip "$t not installed (scripts/setup.sh installs it)"
done
mport=$(free_port)
pport=$(free_port)
cat > "$work/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
scrape_configs:
  - job_name: memsnap
    static_configs:
      - targets: ["127.0.0.1:$mport"]
YML
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
    --web.listen-address="127.0.0.1:$pport" > "$work/prometheus.log" 2>&1 &
prom=$!
at_exit "kill $prom 2>/dev/null; wait $prom 2>/dev/null"
wait_for 60 curl -sf "http://127.0.0.1:$pport/-/ready" -o /dev/null ||
    { bad "Prometheus did not start"; tail -5 "$work/prometheus.log"; exit 1; }

step=$((32 << 20))
"$memsnap" run --metrics "127.0.0.1:$mport" --sim-device 8G -o "$work/climb.msnap" -- \
    "$climb" 32 60 100 4000 > /dev/null 2> "$work/run.err" &
run=$!
at_exit "kill $run 2>/dev/null"
wait_for 10 curl -sf "http://127.0.0.1:$mport/metrics" -o /dev/null || bad "no metrics served"
wait_for 10 sh -c "curl -sf http://127.0.0.1:$mport/metrics | grep -q '^memsnap_reserved_bytes{'" ||
    bad "no memsnap_reserved_bytes series"
curl -sf "http://127.0.0.1:$mport/metrics" > "$work/metrics.txt"
promtool check metrics < "$work/metrics.txt" > "$work/promtool.out" 2>&1 ||
    { bad "promtool check metrics"; cat "$work/promtool.out"; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/other")
[ "$code" = 404 ] || bad "GET /other answered $code, not 404"
wait $run
rc=$?
[ "$rc" = 0 ] || { bad "memsnap run exited $rc"; cat "$work/run.err"; }
grep -q "metrics at http://127.0.0.1:$mport/metrics" "$work/run.err" || bad "no 'metrics at' line"
sleep 2   # the last scrapes are in

q() {
    curl -sf --data-urlencode "query=$1" "http://127.0.0.1:$pport/api/v1/query" |
        jq -r '.data.result[0].value[1] // "none"'
}
prom_max=$(q 'max_over_time(memsnap_reserved_bytes[5m])')
prom_peak=$(q 'max_over_time(memsnap_peak_reserved_bytes[5m])')
"$memsnap" summary --json "$work/climb.msnap" > "$work/summary.json"
peak=$(jq '.devices[0].reserved.peak' "$work/summary.json")
pid=$(jq '.header.pid' "$work/summary.json")
echo "Prometheus max_over_time(memsnap_reserved_bytes[5m]) = $prom_max; summary's peak = $peak"
if [ "$prom_max" = none ]; then
    bad "Prometheus has no memsnap_reserved_bytes"
else
    d=$(awk -v a="$peak" -v b="$prom_max" 'BEGIN{printf "%.0f", a - b}')
    [ "$d" -ge 0 ] && [ "$d" -le "$step" ] ||
        bad "max_over_time differs from the peak by $d bytes (one step is $step)"
fi
[ "$prom_peak" = "$peak" ] || bad "memsnap_peak_reserved_bytes $prom_peak, summary's peak $peak"
labels=$(curl -sf --data-urlencode 'query=last_over_time(memsnap_reserved_bytes[5m])' \
         "http://127.0.0.1:$pport/api/v1/query" | jq -c '.data.result[0].metric')
host=$(hostname)
echo "$labels" | jq -e --arg pid "$pid" --arg host "$host" \
    '.pid == $pid and .host == $host and .device == "0" and (has("rank") | not)' > /dev/null ||
    bad "labels $labels (want pid $pid, host $host, device 0, no rank: \$RANK is unset)"
exit $fail
