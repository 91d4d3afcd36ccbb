#!/usr/bin/env bash
# Foundation figures of the release binary (docs/performance.md, "Foundation"):
#   binary size, time from start to /readyz answering 200, idle RSS, and requests/s with
#   p50/p99 of an authenticated GET /api/v1/auth/me under 64 connections for 10 s (wrk).
# Usage: scripts/bench-foundation.sh [RUNS]   (needs target/release/steward and wrk)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
bin=target/release/steward
[ -x "$bin" ] || { echo "build it first: cargo build --release --locked" >&2; exit 1; }
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }

echo "binary: $(stat -c %s "$bin") bytes ($(du -h "$bin" | cut -f1))"
for run in $(seq 1 "$runs"); do
  dir=$(mktemp -d)
  token=$("$bin" --data-dir "$dir/data" admin bootstrap --email bench@example.com --password bench-password --print-token)
  start=$(date +%s%N)
  STEWARD_LOG=warn "$bin" --data-dir "$dir/data" serve --listen 127.0.0.1:0 >"$dir/out" 2>"$dir/err" &
  pid=$!
  until grep -q 'listening on' "$dir/out" 2>/dev/null; do sleep 0.005; done
  base=$(sed -n 's/^steward listening on //p' "$dir/out")
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/readyz")" = 200 ]; do sleep 0.005; done
  ready_ms=$(( ($(date +%s%N) - start) / 1000000 ))
  sleep 2
  idle_rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  out=$(wrk -t2 -c64 -d10s --latency -H "Authorization: Bearer $token" "$base/api/v1/auth/me")
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1 == "50%" {print $2}')
  p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $4}')
  echo "run $run: ready in ${ready_ms} ms, idle RSS $((idle_rss / 1024)) MiB, auth/me ${rps} req/s, p50 ${p50}, p99 ${p99}${non2xx:+, non-2xx $non2xx}"
  kill -TERM "$pid"; wait "$pid" || true
  rm -rf "$dir"
done
