#!/bin/bash
# build-image.sh builds pgimageai's container image offline: a static binary
# (CGO_ENABLED=0) in an image with no base at all (the equivalent of FROM scratch), made
# with "docker import" from a tar assembled here, so that nothing is pulled from a registry.
#
# The image holds only:
#   /usr/local/bin/pgimageai            the binary (entrypoint; "run" is the default command)
#   /etc/ssl/certs/ca-certificates.crt  the host's CA bundle, for sslmode=verify-full and
#                                       HTTPS providers (Go reads this path on Linux)
#   /etc/passwd, /etc/group             the non-root user pgimageai (65532:65532), which the
#                                       image runs as
#   /tmp                                mode 1777
# and exposes the metrics port 9187 (PGIMAGEAI_METRICS_ADDR=:9187 is set). It is a no-op when
# the image exists and was built from the same binary, bundle and script (the recipe label);
# the binary is always rebuilt first, which the Go build cache makes cheap.
#
# The Dockerfile at the repository root builds the same image with a registry (golang
# builder, then FROM scratch) and adds a HEALTHCHECK, which "docker import" cannot set.
#
# Usage: scripts/build-image.sh [--force]
#   --force   re-import even when the image was built from this recipe
# Environment:
#   PGIMAGEAI_IMAGE    image name (default pgimageai:dev)
#   PGIMAGEAI_CA_FILE  CA bundle (default /etc/ssl/certs/ca-certificates.crt)
set -Eeuo pipefail

image="${PGIMAGEAI_IMAGE:-pgimageai:dev}"
ca="${PGIMAGEAI_CA_FILE:-/etc/ssl/certs/ca-certificates.crt}"
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
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"

# -trimpath and -buildvcs=false make the binary depend on the code only, not on the
# checkout's path or commit, so that the recipe changes only when the binary does.
# -tags nodynamic: the HEIF and AVIF decoders run their WebAssembly builds only; without it
# they link purego, which makes even a CGO_ENABLED=0 binary dynamically linked (it needs
# ld-linux, which an image with no base lacks: "exec /usr/local/bin/pgimageai: no such file").
(cd "$here/.." && CGO_ENABLED=0 go build -tags nodynamic -trimpath -buildvcs=false -ldflags='-s -w' \
	-o "$root/usr/local/bin/pgimageai" ./cmd/pgimageai)
install -m 0644 "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\npgimageai:x:65532:65532:pgimageai:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\npgimageai:x:65532:\n' >"$root/etc/group"
chmod 0755 "$root/usr/local/bin/pgimageai" "$root/usr" "$root/usr/local" "$root/usr/local/bin" "$root/etc" "$root/etc/ssl" "$root/etc/ssl/certs"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
chmod 1777 "$root/tmp"

recipe=$(cat "$root/usr/local/bin/pgimageai" "$root/etc/ssl/certs/ca-certificates.crt" "$root/etc/passwd" "$root/etc/group" "$here/build-image.sh" | sha256sum | cut -c1-16)
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
id=$(tar -C "$root" --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00:00Z' -cf - \
	etc tmp usr |
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
		--message "pgimageai: static binary, CA bundle, non-root user" \
		-)
docker tag "$id" "$image"
if [ -n "$old" ] && [ "$old" != "$id" ]; then
	docker rmi "$old" >/dev/null 2>&1 || say "note: the previous image $old is still in use; not removed"
fi
size=$(docker image inspect -f '{{.Size}}' "$image")
say "built $image ($id, $((size / 1024)) KiB, recipe $recipe) in $(($(date +%s) - start))s"
