#!/bin/sh
# Installs the Debian packages gw needs to build, test and benchmark, when missing.
# Checks with dpkg first, so a machine that has everything runs no apt-get at all.
# clang and libclang-rt-dev (the libFuzzer and sanitizer runtimes, which clang only
# recommends) build the fuzz targets that `make test` and `make fuzz` run; clang-format
# is `make check-fmt`, which `make test` runs. zlib1g-dev, libbrotli-dev and libzstd-dev
# decode compressed request bodies (core/decode.c; libbrotli-dev's encoder makes the
# unit tests' br bodies); python3-brotli and python3-zstandard make the end-to-end
# tests' br and zstd bodies (tests/e2e/test_compressed_body.py); python3-prometheus-client
# parses /metrics as Prometheus would (tests/e2e/test_metrics.py); python3-h2 (with
# hyperframe and hpack) and nghttp2-client's h2load are the HTTP/2 clients of
# tests/e2e/test_http2.py.
set -e
PKGS="build-essential pkg-config libevent-dev libnghttp2-dev libssl-dev libjansson-dev
libcyaml-dev libyaml-dev liblmdb-dev libck-dev libcmocka-dev libhttp-parser-dev libwslay-dev
zlib1g-dev libbrotli-dev libzstd-dev
python3 python3-pytest python3-brotli python3-zstandard python3-prometheus-client python3-h2
nghttp2-client nginx-light nodejs npm clang
libclang-rt-dev clang-format curl"
missing=""
for p in $PKGS; do
    # nodejs/npm may come from outside Debian (a preinstalled node); take a working npm as enough.
    case $p in nodejs|npm) command -v "$p" >/dev/null 2>&1 && continue;; esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
# Debian starts nginx on :80 when it installs it; the benchmark starts its own.
if command -v service >/dev/null 2>&1; then $SUDO service nginx stop >/dev/null 2>&1 || true; fi
