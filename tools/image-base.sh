#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/image-base.sh - makes the local base image debian:bookworm-slim that the Dockerfile
# starts FROM, for machines that reach no container registry (only the Debian archive).
#   sh tools/image-base.sh [--force]
# 1. Installs podman, buildah, runc and mmdebstrap with apt-get when one is missing.
# 2. Writes /etc/containers/containers.conf (root) or ~/.config/containers/containers.conf
#    when it has no gw settings: runc as the runtime (crun fails on hybrid cgroup v1/v2
#    hosts and on raising RLIMIT_NOFILE), default_ulimits nofile=20000 and nproc=32768.
# 3. Unless the image exists (or --force): mmdebstrap a bookworm minbase rootfs (merged
#    /usr, docs, man pages and locales left out as in Debian's -slim images) from the
#    Debian mirror apt uses on this machine (its sources lists), `podman import` it and
#    tag it debian:bookworm-slim (docker.io/library/... too, so a FROM resolves locally).
# `make image` runs this when the base image is missing. See docs/deploy.md.
set -eu

BASE=docker.io/library/debian:bookworm-slim
SUITE=bookworm
force=0
[ "${1:-}" = "--force" ] && force=1

SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# ---- 1. the tools ----
missing=""
for p in podman buildah runc mmdebstrap; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "image-base: installing$missing"
    $SUDO apt-get update -qq
    # shellcheck disable=SC2086 # $missing is a list of package names, split on purpose
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi

# ---- 2. containers.conf ----
if [ "$(id -u)" = 0 ]; then
    CONF=/etc/containers/containers.conf
else
    CONF=${XDG_CONFIG_HOME:-$HOME/.config}/containers/containers.conf
fi
if ! grep -q 'nofile=20000' "$CONF" 2>/dev/null; then
    if [ -s "$CONF" ]; then
        # Someone else's file: do not rewrite it; say what it needs.
        echo "image-base: $CONF exists without gw's settings; make sure it has" >&2
        echo '  [containers] default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]' >&2
        echo '  [engine] runtime = "runc"' >&2
    else
        echo "image-base: writing $CONF (runtime runc, default_ulimits)"
        mkdir -p "$(dirname "$CONF")"
        cat >"$CONF" <<'EOF'
# Written by gw's tools/image-base.sh. runc, not crun: crun fails on hybrid cgroup
# (v1 + v2) hosts and when raising RLIMIT_NOFILE. The ulimits apply to every container.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
EOF
    fi
fi

# ---- 3. the base image ----
if [ $force = 0 ] && podman image exists "$BASE"; then
    echo "image-base: $BASE exists ($(podman image inspect --format '{{.Id}}' "$BASE" | cut -c1-12))"
    exit 0
fi

# The mirrors apt uses here: one-line (deb URI ...) and deb822 (URIs: ...) sources.
mirrors=""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    mirrors="$mirrors $(awk '
        /^[[:space:]]*deb[[:space:]]/ { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }
        /^URIs:/ { for (i = 2; i <= NF; i++) print $i }' "$f")"
done
main="" security=""
for m in $mirrors; do
    case $m in
    */debian-security | */debian-security/) [ -n "$security" ] || security=${m%/} ;;
    */debian | */debian/) [ -n "$main" ] || main=${m%/} ;;
    esac
done
if [ -z "$main" ]; then
    echo "image-base: no Debian mirror (.../debian) in /etc/apt/sources.list{,.d/}" >&2
    exit 1
fi
echo "image-base: mmdebstrap $SUITE minbase from $main${security:+ and $security}"

set -- "deb $main $SUITE main" "deb $main $SUITE-updates main"
[ -n "$security" ] && set -- "$@" "deb $security $SUITE-security main"

# Streams the rootfs as a tarball into podman import: no temporary tree on disk.
$SUDO mmdebstrap --variant=minbase --quiet \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --aptopt='APT::Install-Recommends "false"' \
    "$SUITE" - "$@" |
    podman import --change 'CMD ["bash"]' --message "gw: mmdebstrap $SUITE minbase" - "$BASE"
podman tag "$BASE" localhost/debian:bookworm-slim
echo "image-base: $BASE ready ($(podman image inspect --format '{{.Size}}' "$BASE") bytes)"
