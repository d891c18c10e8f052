#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/image-test.sh - runs the container image for real with podman (`make image-test`,
# after `make image`; not part of `make test`).
#   sh tools/image-test.sh [IMAGE]        (default localhost/gw:latest)
# Each step prints "ok - ..." or "FAIL - ..." and the run stops at the first failure with
# the container's log; exit 0 only when every step passed. Steps:
#   1. the image: runs as a non-root user, ldd finds every library of gwd/gwctl/gwbench
#   2. gwd started from the image: config mounted read-only at /etc/gw/gw.yaml, secrets
#      (upstream key, gateway key, control token) from the environment, the store on a
#      named volume, the data and control ports published on 127.0.0.1
#   3. a fake upstream (`gwbench upstream`, from the image) in gwd's network namespace
#   4. a chat request through the published data port answers 200 with the fake's text
#   5. `gwctl status` (token) through the published control port
#   6. `podman healthcheck run` says healthy (the image's HEALTHCHECK: gwctl health)
#   7. SIGTERM to PID 1: the container exits with code 0
#   8. a new container on the same volume lists the request's row (gwctl traffic)
# Everything it makes (containers, the volume, build/image-test/) is removed at the end.
set -eu

IMAGE=${1:-localhost/gw:latest}
RUN=gwtest-$$
TMP=$(pwd)/build/image-test
VOL=$RUN-store
UP_KEY=sk-upstream-image-test
TEAM_KEY=gw-team-image-test
TOKEN=control-image-test
started=""
failed=0

ok() { echo "ok   - $*"; }
fail() {
    echo "FAIL - $*"
    failed=1
    for c in $started; do
        echo "---- podman logs $c (last 30 lines)"
        podman logs --tail 30 "$c" 2>&1 || true
    done
    exit 1
}
cleanup() {
    # Newest first: the fake shares the first gwd's network namespace.
    rev=""
    for c in $started; do rev="$c $rev"; done
    for c in $rev; do podman rm -f -v -t 0 "$c" >/dev/null 2>&1 || true; done
    podman volume rm -f "$VOL" >/dev/null 2>&1 || true
    rm -rf "$TMP"
    [ $failed = 0 ] || echo "image-test: FAILED"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Polls <cmd> up to 20 s (gwd listens within milliseconds; the bound is for slow hosts).
wait_for() {
    what=$1
    shift
    i=0
    until "$@" >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 200 ] || fail "$what: not within 20 s"
        sleep 0.1
    done
}

# gwctl from the image, on the host network, so it reaches the published ports.
gwctl() {
    podman run --rm --no-healthcheck --network=host --entrypoint gwctl "$IMAGE" \
        --url "http://127.0.0.1:$CTL_PORT" --token "$TOKEN" "$@"
}

echo "image-test: $IMAGE ($(podman image inspect --format '{{.Size}}' "$IMAGE") bytes)"
mkdir -p "$TMP"

# ---- 1. the image ----
uid=$(podman run --rm --no-healthcheck --entrypoint id "$IMAGE" -u)
[ "$uid" != 0 ] || fail "the image runs as root"
ok "runs as uid $uid ($(podman run --rm --no-healthcheck --entrypoint id "$IMAGE" -un))"
missing=$(podman run --rm --no-healthcheck --entrypoint sh "$IMAGE" -c \
    'ldd /usr/local/bin/gwd /usr/local/bin/gwctl /usr/local/bin/gwbench' | grep 'not found' || true)
[ -z "$missing" ] || fail "libraries missing in the image: $missing"
ok "ldd finds every library of gwd, gwctl, gwbench"
hc=$(podman image inspect --format '{{json .HealthCheck}}' "$IMAGE" 2>/dev/null || echo null)
case $hc in *gwctl*health*) ok "HEALTHCHECK kept: $hc" ;; *) fail "no HEALTHCHECK in the image (built without --format docker?): $hc" ;; esac

UP_PORT=9100
DATA_PORT=$(free_port)
CTL_PORT=$(free_port)

# ---- 2. gwd in the image ----
# gwd runs on podman's bridge network, so its ports are really published; the fake
# upstream joins its network namespace (as in a pod) and listens on its loopback.
cat >"$TMP/gw.yaml" <<EOF
server:
  listen: ["0.0.0.0:8080"]
  workers: 2
  drain_secs: 5
control:
  listen: 0.0.0.0:8081
  token_env: GW_CONTROL_TOKEN
store:
  path: /var/lib/gw
providers:
  - name: fake
    dialect: openai
    base_url: http://127.0.0.1:$UP_PORT
    keys: [{ env: UPSTREAM_KEY }]
    models: ["*"]
clients:
  - name: team
    key_env: GW_KEY_TEAM
EOF
chmod 644 "$TMP/gw.yaml"
podman volume create "$VOL" >/dev/null
# --health-interval=disable: the image's HEALTHCHECK stays (step 6 runs it), but podman
# sets up no systemd timer for it (there may be no systemd; docs/deploy.md).
start_gw() {
    # podman 4.3 still logs that it found no systemd for the healthcheck's timer; its
    # stderr is shown only when the run fails.
    podman run -d --name "$1" --health-interval=disable \
        -v "$TMP/gw.yaml:/etc/gw/gw.yaml:ro,Z" -v "$VOL:/var/lib/gw" \
        -e UPSTREAM_KEY="$UP_KEY" -e GW_KEY_TEAM="$TEAM_KEY" -e GW_CONTROL_TOKEN="$TOKEN" \
        -p "127.0.0.1:$DATA_PORT:8080" -p "127.0.0.1:$CTL_PORT:8081" \
        "$IMAGE" >/dev/null 2>"$TMP/run.err" || fail "podman run $1: $(cat "$TMP/run.err")"
    started="$started $1"
    wait_for "$1: /healthz on the published control port :$CTL_PORT" \
        curl -sf "http://127.0.0.1:$CTL_PORT/healthz"
}
start_gw "$RUN-gw"
ok "gwd up: data 127.0.0.1:$DATA_PORT->8080, control 127.0.0.1:$CTL_PORT->8081, volume $VOL"

# ---- 3, 4. the fake upstream, then a chat request through the data port ----
podman run -d --name "$RUN-up" --no-healthcheck --network "container:$RUN-gw" \
    --entrypoint gwbench "$IMAGE" \
    upstream --listen "127.0.0.1:$UP_PORT" --chunks 3 --text "hello from the fake" >/dev/null
started="$started $RUN-up"
fake_listening() { podman logs "$RUN-up" 2>&1 | grep -q "listening on"; }
wait_for "fake upstream on :$UP_PORT" fake_listening
ok "fake upstream (gwbench upstream from the image) on 127.0.0.1:$UP_PORT in gwd's network"

code=$(curl -s -o "$TMP/chat.json" -D "$TMP/chat.head" -w '%{http_code}' \
    -H "Authorization: Bearer $TEAM_KEY" -H 'Content-Type: application/json' \
    -d '{"model":"gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}' \
    "http://127.0.0.1:$DATA_PORT/v1/chat/completions")
[ "$code" = 200 ] || fail "chat request: HTTP $code: $(cat "$TMP/chat.json")"
grep -q "hello from the fake" "$TMP/chat.json" || fail "chat answer lacks the fake's text: $(cat "$TMP/chat.json")"
rid=$(awk -F': *' 'tolower($1) == "x-request-id" { sub(/\r$/, "", $2); print $2 }' "$TMP/chat.head")
[ -n "$rid" ] || fail "no x-request-id on the chat answer"
ok "chat request through :$DATA_PORT: 200, the fake's text, request id $rid"

# ---- 5. gwctl status through the control port ----
out=$(gwctl status) || fail "gwctl status: $out"
echo "$out" | grep -q 'health *ok' || fail "gwctl status: $out"
ok "gwctl status through :$CTL_PORT: $(echo "$out" | tr -s ' ' | tr '\n' ';')"

# ---- 6. the HEALTHCHECK ----
out=$(podman healthcheck run "$RUN-gw" 2>&1) || fail "podman healthcheck run: exit $?: $out"
st=$(podman inspect --format '{{.State.Health.Status}}' "$RUN-gw")
[ "$st" = healthy ] || fail "podman healthcheck run exited 0 but the state is '$st'"
ok "podman healthcheck run: exit 0${out:+ ($out)}, state $st"

# ---- 7. SIGTERM to PID 1 ----
# The row is written by the store's batch thread; wait until it is readable first, so
# step 8 tests that it survives the stop and not the batch timing.
row_listed() { gwctl --json traffic --limit 5 | grep -q "$rid"; }
wait_for "row $rid in gwctl traffic" row_listed
# The fake leaves first: it lives in this container's network namespace.
podman rm -f -v -t 0 "$RUN-up" >/dev/null
podman kill --signal TERM "$RUN-gw" >/dev/null
# A PID 1 without a SIGTERM handler ignores it: the timeout turns that into a failure.
rc=$(timeout 30 podman wait "$RUN-gw") || fail "gwd still running 30 s after SIGTERM"
[ "$rc" = 0 ] || fail "gwd exited $rc after SIGTERM"
podman logs "$RUN-gw" 2>&1 | grep -q "code=stopped" || fail "no 'stopped' line in gwd's log"
ok "SIGTERM: gwd (PID 1) drained, logged $(podman logs "$RUN-gw" 2>&1 | grep -o 'msg="rows committed[^"]*"'), exited 0"

# ---- 8. the rows survive in the volume ----
start_gw "$RUN-gw2"
out=$(gwctl --json traffic --limit 5) || fail "gwctl traffic: $out"
echo "$out" | grep -q "$rid" || fail "row $rid not in the store after a restart: $out"
ok "restarted on volume $VOL: gwctl traffic lists row $rid"
podman kill --signal TERM "$RUN-gw2" >/dev/null
rc=$(timeout 30 podman wait "$RUN-gw2") || fail "second gwd still running 30 s after SIGTERM"
[ "$rc" = 0 ] || fail "second gwd exited $rc after SIGTERM"

echo "image-test: all steps passed"
