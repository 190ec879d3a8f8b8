#!/usr/bin/env bash
# Builds the base image `sda-fusion-base:bookworm` from Debian's packages, for machines that cannot
# pull python:3.11-slim-bookworm from Docker Hub: debootstrap (bookworm: Python 3.11 is its python3)
# into a folder, then `docker import`. The root file system is cached as a tarball under var/docker/,
# so a second build is a few seconds. Needs root, debootstrap and a Docker engine.
#
#   docker/build-base.sh [image-name]      (default sda-fusion-base:bookworm)
#   MIRROR=http://deb.debian.org/debian    the Debian mirror
#
# The base trusts what this machine trusts: the local CA certificates under
# /usr/local/share/ca-certificates (a proxy's, say) and pip's `cert` setting are copied in.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE="${1:-sda-fusion-base:bookworm}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"
CACHE="var/docker"
TARBALL="$CACHE/base-bookworm.tar"

if docker image inspect "$IMAGE" >/dev/null 2>&1; then
    echo "build-base: $IMAGE exists"
    exit 0
fi
mkdir -p "$CACHE"
if [[ ! -s "$TARBALL" ]]; then
    command -v debootstrap >/dev/null || { echo "build-base: debootstrap is not installed (apt-get install debootstrap)" >&2; exit 1; }
    rootfs="$(mktemp -d "$CACHE/rootfs.XXXXXX")"
    chmod 755 "$rootfs"  # the image's / (mktemp makes it 0700: no other user could reach /bin)
    trap 'rm -rf "$rootfs"' EXIT
    echo "build-base: debootstrap bookworm from $MIRROR (about a minute)"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$rootfs" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 \
        || { tail -20 "$CACHE/debootstrap.log" >&2; exit 1; }
    printf 'deb %s bookworm main\ndeb %s bookworm-updates main\n' "$MIRROR" "$MIRROR" >"$rootfs/etc/apt/sources.list"
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null
    fi
    if [[ -f /etc/pip.conf ]]; then cp /etc/pip.conf "$rootfs/etc/pip.conf"; fi
    # what python:3.11-slim-bookworm has and the Dockerfile relies on: `python3 -m venv`, no apt cache
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$rootfs" -cf "$TARBALL.part" .
    mv "$TARBALL.part" "$TARBALL"
fi
docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' "$TARBALL" "$IMAGE" >/dev/null
echo "build-base: imported $IMAGE from $TARBALL"
