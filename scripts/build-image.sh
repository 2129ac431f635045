#!/bin/bash
# build-image.sh builds pgimageai's container image offline, from this machine only: the
# binary built with cgo, which opens libvips (the image backend of JPEG, HEIF and AVIF) at
# the first image that needs it, in an
# image with no base (the equivalent of FROM scratch) made with "docker import" from a tar
# assembled here by scripts/image-root.sh, so that nothing is pulled from a registry.
#
# The image holds only:
#   /usr/local/bin/pgimageai            the binary (entrypoint; "run" is the default command)
#   /lib*, /usr/lib/...                 the shared libraries the binary loads (its ldd
#                                       closure, glibc), the dynamic loader, libvips.so.42
#                                       and its closure (libheif, libde265, dav1d, libaom...),
#                                       libvips's HEIF module
#                                       and its closure, and an ld.so.cache for them
#   /etc/ssl/certs/ca-certificates.crt  the host's CA bundle, for sslmode=verify-full and
#                                       HTTPS providers (Go reads this path on Linux)
#   /etc/passwd, /etc/group             the non-root user pgimageai (65532:65532), which the
#                                       image runs as
#   /tmp                                mode 1777
# and exposes the metrics port 9187 (PGIMAGEAI_METRICS_ADDR=:9187 is set). It is a no-op when
# the image exists and was built from the same tree and script (the recipe label); the
# binary is always rebuilt first, which the Go build cache makes cheap.
#
# PGIMAGEAI_IMAGE_BACKEND=go builds the static pure-Go binary instead (CGO_ENABLED=0,
# -tags nodynamic: the WebAssembly decoders of HEIF and AVIF, no library at all).
#
# The Dockerfile at the repository root builds the same image with a registry (golang
# builder, then FROM scratch) and adds a HEALTHCHECK, which "docker import" cannot set.
#
# Usage: scripts/build-image.sh [--force]
#   --force   re-import even when the image was built from this recipe
# Environment:
#   PGIMAGEAI_IMAGE          image name (default pgimageai:dev)
#   PGIMAGEAI_CA_FILE        CA bundle (default /etc/ssl/certs/ca-certificates.crt)
#   PGIMAGEAI_IMAGE_BACKEND  vips (default) or go
set -Eeuo pipefail
PATH=$PATH:/usr/sbin:/sbin # ldconfig, for a user whose PATH lacks them

image="${PGIMAGEAI_IMAGE:-pgimageai:dev}"
ca="${PGIMAGEAI_CA_FILE:-/etc/ssl/certs/ca-certificates.crt}"
backend="${PGIMAGEAI_IMAGE_BACKEND:-vips}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

say() { printf 'build-image: %s\n' "$*" >&2; }
die() {
	say "ERROR: $*"
	exit 1
}
trap 'die "command failed (line $LINENO): $BASH_COMMAND"' ERR

force=false
for arg in "$@"; do
	case "$arg" in
	--force) force=true ;;
	-h | --help)
		sed -n '2,/^set -E/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"
		exit 0
		;;
	*) die "unknown argument: $arg (try --help)" ;;
	esac
done

start=$(date +%s)
command -v go >/dev/null || die "go is not installed"
docker info >/dev/null 2>&1 || die "the Docker daemon does not answer: $(docker info 2>&1 | tail -n 3)"
[ -s "$ca" ] || die "no CA bundle at $ca (apt-get install ca-certificates, or set PGIMAGEAI_CA_FILE)"

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT

# -trimpath and -buildvcs=false make the binary depend on the code only, not on the
# checkout's path or commit, so that the recipe changes only when the binary does.
case "$backend" in
vips)
	[[ $(ldconfig -p) == *'libvips.so.42 '* ]] || die "libvips is not installed (apt-get install libvips-dev), or set PGIMAGEAI_IMAGE_BACKEND=go"
	(cd "$here/.." && CGO_ENABLED=1 go build -trimpath -buildvcs=false -ldflags='-s -w' -o "$root/pgimageai" ./cmd/pgimageai)
	;;
go)
	(cd "$here/.." && CGO_ENABLED=0 go build -tags nodynamic -trimpath -buildvcs=false -ldflags='-s -w' -o "$root/pgimageai" ./cmd/pgimageai)
	;;
*) die "PGIMAGEAI_IMAGE_BACKEND is vips or go, not $backend" ;;
esac
"$here/image-root.sh" "$root/tree" "$root/pgimageai" "$ca"
"$root/tree/usr/local/bin/pgimageai" --version >&2 || die "the binary does not start"

recipe=$( (cd "$root/tree" && find . -type f -print0 | sort -z | xargs -0 sha256sum; cat "$here/build-image.sh" "$here/image-root.sh") | sha256sum | cut -c1-16)
old=""
if docker image inspect "$image" >/dev/null 2>&1; then
	old=$(docker image inspect -f '{{.Id}}' "$image")
	have=$(docker image inspect -f '{{index .Config.Labels "org.pgimageai.recipe"}}' "$image")
	if ! $force && [ "$have" = "$recipe" ]; then
		say "$image exists (recipe $recipe); nothing to do (use --force to rebuild)"
		exit 0
	fi
fi

# A reproducible tar: fixed owner, times and order.
id=$(tar -C "$root/tree" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00:00Z' -cf - \
	. |
	docker import \
		--change 'ENTRYPOINT ["/usr/local/bin/pgimageai"]' \
		--change 'CMD ["run"]' \
		--change 'USER 65532:65532' \
		--change 'WORKDIR /tmp' \
		--change 'ENV PGIMAGEAI_METRICS_ADDR=:9187' \
		--change 'EXPOSE 9187' \
		--change "LABEL org.pgimageai.recipe=$recipe" \
		--change 'LABEL org.opencontainers.image.title=pgimageai' \
		--change 'LABEL org.opencontainers.image.description="AI functions over PostgreSQL image columns, live from the WAL"' \
		--message "pgimageai ($backend backend): binary, its libraries, CA bundle, non-root user" \
		-)
docker tag "$id" "$image"
if [ -n "$old" ] && [ "$old" != "$id" ]; then
	docker rmi "$old" >/dev/null 2>&1 || say "note: the previous image $old is still in use; not removed"
fi
size=$(docker image inspect -f '{{.Size}}' "$image")
say "built $image ($id, $((size / 1024)) KiB, recipe $recipe) in $(($(date +%s) - start))s"
