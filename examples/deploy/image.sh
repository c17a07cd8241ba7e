#!/bin/sh
# image.sh BINARY IMAGE: the container image (Dockerfile.prebuilt) from a
# static spangle binary, as make image runs it. CONTAINER_ENGINE picks
# podman (the default) or docker.
set -eu
bin=$1
image=$2
engine=${CONTAINER_ENGINE:-podman}
here=$(cd "$(dirname "$0")" && pwd)

# scratch has no libc: a dynamically linked binary would not start.
if ldd "$bin" >/dev/null 2>&1; then
	echo "image.sh: $bin is dynamically linked; build it with CGO_ENABLED=0 (make build does)" >&2
	exit 1
fi
certs=${CA_CERTIFICATES:-/etc/ssl/certs/ca-certificates.crt}
[ -r "$certs" ] || { echo "image.sh: no CA certificates at $certs (apt-get install ca-certificates, or set CA_CERTIFICATES)" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
cp -R "$here/rootfs" "$ctx/rootfs"
install -D -m 0755 "$bin" "$ctx/rootfs/usr/bin/spangle"
install -D -m 0644 "$here/spangle.toml" "$ctx/rootfs/etc/spangle/spangle.toml"
install -D -m 0644 "$certs" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
# /var/lib belongs to root; only the data dir (the volume) to the user.
mkdir -p "$ctx/rootfs/var/lib" "$ctx/data"

# podman writes OCI images by default, which have no HEALTHCHECK.
format=
[ "$engine" = podman ] && format="--format docker"
# shellcheck disable=SC2086
"$engine" build $format -f "$here/Dockerfile.prebuilt" -t "$image" "$ctx"
