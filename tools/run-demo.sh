#!/bin/sh
# `make run`: starts gwbench upstream on 127.0.0.1:9100 and gwd on 127.0.0.1:8080 with
# the demo config etc/gw.yaml, prints a curl command that works, and stops both on Ctrl-C.
set -e
cd "$(dirname "$0")/.."
export GW_CONTROL_TOKEN="${GW_CONTROL_TOKEN:-gw-demo-control-token}"
mkdir -p build
bin/gwbench upstream --listen 127.0.0.1:9100 --threads 1 --ttft-ms 20 --chunks 8 --interval-ms 15 &
UP=$!
bin/gwd -c etc/gw.yaml &
GWD=$!
trap 'kill $GWD $UP 2>/dev/null; wait $GWD $UP 2>/dev/null; exit 0' INT TERM
# Wait until the gateway answers its health check (bounded).
i=0
until curl -sf http://127.0.0.1:8080/healthz >/dev/null 2>&1; do
    i=$((i + 1))
    if [ $i -gt 100 ] || ! kill -0 $GWD 2>/dev/null; then
        echo "gwd did not start; see the lines above" >&2
        kill $UP 2>/dev/null
        exit 1
    fi
    sleep 0.1
done
cat <<MSG

gw is running: data plane http://127.0.0.1:8080, control http://127.0.0.1:8081
(fake upstream: gwbench on 127.0.0.1:9100). Try:

  curl -s http://127.0.0.1:8080/v1/chat/completions \\
    -H 'Authorization: Bearer gw-demo-key' -H 'Content-Type: application/json' \\
    -d '{"model":"demo-model","messages":[{"role":"user","content":"Hi"}]}'

  curl -sN http://127.0.0.1:8080/v1/chat/completions \\
    -H 'Authorization: Bearer gw-demo-key' -H 'Content-Type: application/json' \\
    -d '{"model":"demo-model","stream":true,"messages":[{"role":"user","content":"Hi"}]}'

  bin/gwctl --token $GW_CONTROL_TOKEN traffic

Ctrl-C stops both.
MSG
wait $GWD
kill $UP 2>/dev/null || true
