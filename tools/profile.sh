#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/profile.sh - the request path's profile as docs/perf.md reports it: gwd with one
# worker relays Chat requests (4 connections, `gwbench load`) to `gwbench upstream`;
# after 300 warm-up requests, N requests are counted. Two figures that do not depend on
# how busy the machine is:
#   - instructions per request (valgrind callgrind, every thread of gwd) and the
#     functions with the most instructions of their own;
#   - system calls per request (strace -c -f on gwd), by call.
# Not part of `make test` (about a minute). Needs valgrind and strace (Debian packages).
#
# usage: tools/profile.sh [BINDIR] [N] [LOG_LEVEL] [DIALECT]
#        (default build/release/bin 2000 warn openai)
# DIALECT is the provider's (openai, anthropic, responses or gemini): anything but
# openai profiles a converted path (the Chat request and answer said in that shape, as
# bench/run.py's gwd-conv cell does with anthropic).
# PROFILE_API=messages sends Anthropic Messages requests (/v1/messages) instead of Chat:
# with DIALECT anthropic the Messages splice, with openai the Messages -> Chat conversion
# (bench/run.py's gwd-msg and gwd-msg-conv cells); responses and gemini likewise send
# Responses and Gemini requests (gwd-resp, gwd-resp-conv, gwd-gem, gwd-gem-conv).
# PROFILE_ADM=1 configures the admission path as bench/run.py's gwd+adm cell does (key
# and provider max_concurrent, three key limits, three credentials with quota windows).
# PROFILE_CONNS=N loads with N connections instead of 4 (64 shows what a worker does with
# many requests in flight at once, as make bench loads it: its caches' sizes).
# PROFILE_STREAM=1 counts streamed requests instead (20 chunks each, 1 ms apart, so that
# each chunk is a read of its own as make bench's paced streams are): the figures are per
# stream; less the non-streamed request's and divided by 20, per chunk.
# PROFILE_INTERVAL_MS=N sets that gap (default 1); 0 is an upstream that sends a stream's
# chunks all at once, so that a read holds several.
# PROFILE_KEEP=DIR keeps the callgrind dumps, one file per thread (callgrind_annotate FILE, or
# kcachegrind). The first line splits the total by thread: the workers' (the request path)
# and the store writer's (its LMDB work moves by a few hundred between runs, with the
# batches' sizes).
set -eu
B=${1:-build/release/bin}
N=${2:-2000}
LEVEL=${3:-warn}
DIALECT=${4:-openai}
for t in valgrind callgrind_control strace python3; do
    command -v $t >/dev/null || { echo "profile: $t is missing (apt-get install valgrind strace)"; exit 2; }
done
D=$(mktemp -d)
cleanup() { kill $GPID $UPID 2>/dev/null || true; wait 2>/dev/null || true; [ -n "${PROFILE_KEEP:-}" ] && mkdir -p "$PROFILE_KEEP" && cp "$D"/cg.out.* "$PROFILE_KEEP"/ 2>/dev/null; rm -rf "$D"; }
GPID=; UPID=
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }

"$B/gwbench" upstream --listen 127.0.0.1:0 --threads 1 --quiet > "$D/up.out" &
UPID=$!
for i in $(seq 50); do grep -q listening "$D/up.out" 2>/dev/null && break; sleep 0.1; done
UPORT=$(sed -n 's/.*:\([0-9][0-9]*\).*/\1/p' "$D/up.out" | head -1)
KEY=profile-key-0123
PKEYS="[{value: k}]"
PEXTRA=
CEXTRA=
if [ -n "${PROFILE_ADM:-}" ]; then
    # bench/run.py's gwd+adm: slots, three key limits, three credentials with quota
    # windows, a price (prices.yaml beside the config)
    PKEYS="[{value: k0}, {value: k1}, {value: k2}]"
    PEXTRA=", max_concurrent: 100, quota: {default: {rpm: 1000000000, tpm: 1000000000000, rpd: 10000000000, tpd: 10000000000000}}"
    CEXTRA=", max_concurrent: 100, limits: [{per: minute, requests: 100000000}, {per: day, tokens: 10000000000}, {per: month, cost: 1000000.0}]"
    printf 'models:\n  - { model: mock-model, input: 1.00, output: 4.00 }\n' > "$D/prices.yaml"
fi
cat > "$D/gw.yaml" <<EOF
server: {listen: ["127.0.0.1:$(free_port)"], workers: 1}
control: {listen: "127.0.0.1:$(free_port)"}
store: {path: $D/store}
log: {level: $LEVEL}
providers:
  - {name: mock, dialect: $DIALECT, base_url: "http://127.0.0.1:$UPORT", keys: $PKEYS, models: ["*"]$PEXTRA}
clients:
  - {name: bench, key_sha256: "$(printf %s $KEY | sha256sum | cut -d' ' -f1)"$CEXTRA}
EOF
PORT=$(sed -n 's/.*listen: \["127.0.0.1:\([0-9]*\)"\].*/\1/p' "$D/gw.yaml")

start_gwd() { # $@: a wrapper, or nothing
    "$@" "$B/gwd" -c "$D/gw.yaml" > "$D/gwd.log" 2>&1 &
    GPID=$!
    # the ready line is info: wait for the port instead (log.level may be warn)
    for i in $(seq 900); do
        python3 -c "import socket;socket.create_connection(('127.0.0.1',$PORT),1)" 2>/dev/null &&
            return 0
        sleep 0.1
    done
    echo "profile: gwd did not start"; cat "$D/gwd.log"; exit 1
}
API=${PROFILE_API:-chat}
case $API in
chat) APIPATH=/v1/chat/completions ;;
messages) APIPATH=/v1/messages ;;
responses) APIPATH=/v1/responses ;;
gemini) APIPATH=/v1beta/models/mock-model:generateContent ;;
*) echo "profile: PROFILE_API is chat, messages, responses or gemini"; exit 2 ;;
esac
STREAM=
[ -n "${PROFILE_STREAM:-}" ] && STREAM="--stream --header x-bench-chunks:20 --header x-bench-interval-ms:${PROFILE_INTERVAL_MS:-1} --header x-bench-ttft-ms:0"
load() {
    "$B/gwbench" load --quiet --api $API --url "http://127.0.0.1:$PORT$APIPATH" \
        --key $KEY --connections "${PROFILE_CONNS:-4}" --threads 1 --requests "$1" $STREAM > /dev/null
}
stop_gwd() { kill $GPID; wait $GPID 2>/dev/null || true; GPID=; }

# 1. instructions
start_gwd valgrind --tool=callgrind --compress-strings=no --compress-pos=no \
    --separate-threads=yes --callgrind-out-file="$D/cg.out"
load 300
callgrind_control -z $GPID > /dev/null
load "$N"
callgrind_control -d $GPID > /dev/null
sleep 1
stop_gwd
python3 - "$D" "$N" <<'EOF'
import collections, glob, os, sys
d, n = sys.argv[1], int(sys.argv[2])
# the -d dump: one file per thread (--separate-threads), named cg.out.PID.PART-TT
files = glob.glob(os.path.join(d, "cg.out.*"))
part = max(f.rsplit("-", 1)[0] for f in files)
own = collections.Counter()
by_thread = collections.Counter()
for f in sorted(x for x in files if x.rsplit("-", 1)[0] == part):
    fn, in_call, mine, role = None, False, 0, "other threads"
    for line in open(f):
        if line.startswith("fn="):
            fn = line[3:].strip()
            if "worker_main" in fn:
                role = "workers"
            elif "writer_main" in fn:
                role = "store writer"
        elif line.startswith("calls="):
            in_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            p = line.split()
            if len(p) >= 2:
                if not in_call:
                    own[fn] += int(p[1])
                    mine += int(p[1])
                in_call = False
    by_thread[role] += mine
tot = sum(own.values())
print(f"instructions per request: {tot // n}  (" +
      ", ".join(f"{k} {v // n}" for k, v in sorted(by_thread.items())) + ")")
print("own instructions per request, top 25:")
for name, v in own.most_common(25):
    print(f"  {v // n:7d} {100 * v / tot:5.1f}%  {name[:90]}")
EOF

# 2. system calls
start_gwd
load 300
strace -c -f -p $GPID -o "$D/st.txt" 2> /dev/null &
SPID=$!
sleep 1
load "$N"
kill -INT $SPID
wait $SPID 2>/dev/null || true
stop_gwd
python3 - "$D/st.txt" "$N" <<'EOF'
import sys
n = int(sys.argv[2])
rows = []
for line in open(sys.argv[1]):
    p = line.split()
    if len(p) >= 5 and p[0][0].isdigit() and p[-1] != "total":
        rows.append((int(p[3]), p[-1]))
print(f"system calls per request: {sum(c for c, _ in rows) / n:.2f}")
for c, name in sorted(rows, reverse=True):
    if c / n >= 0.01:
        print(f"  {c / n:6.2f}  {name}")
EOF
