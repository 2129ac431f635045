#!/bin/bash
# build-test-image.sh builds pgimageai-postgres:17, a local stand-in for the official
# postgres:17 image plus pgvector, for machines that cannot reach a container registry.
#
# The root filesystem is a Debian trixie "essential" bootstrap (mmdebstrap) with
# postgresql-17 and postgresql-17-pgvector from the Debian mirror this host already uses;
# scripts/pg-entrypoint.sh provides the official image's POSTGRES_* behaviour. The archive
# signatures are verified with the debian-archive-keyring package's keyring: it has carried
# the trixie keys since 2023.3+deb12u2, and trixie's Release file is also co-signed by the
# bookworm key, so verification works even with an older bookworm keyring.
#
# Differences from postgres:17: locale C.UTF-8 (not en_US.utf8), the postgres user's uid is
# Debian's (not 999), and "docker stop" sends SIGTERM (smart shutdown) because docker import
# cannot set STOPSIGNAL; use "docker kill -s INT" for the official image's fast shutdown.
#
# Usage: scripts/build-test-image.sh [--force]
#   --force   rebuild even when the image exists and was built from this recipe
# Environment:
#   PGIMAGEAI_BUILD_IMAGE     image name (default pgimageai-postgres:17)
#   PGIMAGEAI_DEBIAN_MIRROR   Debian mirror URI (default: the host's apt sources)
set -Eeuo pipefail

image="${PGIMAGEAI_BUILD_IMAGE:-pgimageai-postgres:17}"
suite=trixie
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PGIMAGEAI_ENTRYPOINT="$here/pg-entrypoint.sh"

say() { printf 'build-test-image: %s\n' "$*" >&2; }
die() {
	say "ERROR: $*"
	exit 1
}
trap 'die "command failed (line $LINENO): $BASH_COMMAND"' ERR

# shellcheck source=scripts/image-lib.sh
. "$here/image-lib.sh"
IMAGE_ARGS=("$@")
image_begin "${BASH_SOURCE[0]}" "$PGIMAGEAI_ENTRYPOINT"

if ! ls /usr/share/keyrings/debian-archive-trixie-*.gpg >/dev/null 2>&1; then
	say "note: this keyring has no trixie keys (debian-archive-keyring < 2023.3+deb12u2);"
	say "      verification relies on the bookworm key's co-signature of trixie's Release file"
fi

mirror=$(host_mirror) || die "no Debian mirror found in /etc/apt/sources*; set PGIMAGEAI_DEBIAN_MIRROR"
say "building $image from Debian $suite at $mirror (recipe $recipe)"

# --variant=essential installs only Essential:yes packages plus --include (no apt in the
# image). The setup hook stops postgresql-common from creating a cluster at install time,
# as the official image does; the data directory is made by the entrypoint at first start.
# The tarball goes straight into "docker import"; the image is tagged only if both succeed.
# shellcheck disable=SC2016 # mmdebstrap expands $1 (the chroot) in the hooks itself.
id=$(
	mmdebstrap \
		--variant=essential \
		--include=postgresql-17,postgresql-17-pgvector \
		--keyring="$keyring" \
		--aptopt='Acquire::Retries "3"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--setup-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d"' \
		--setup-hook='echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/pgimageai.conf"' \
		--customize-hook='install -m 0755 "$PGIMAGEAI_ENTRYPOINT" "$1/usr/local/bin/pg-entrypoint.sh"' \
		--customize-hook='chroot "$1" /usr/lib/postgresql/17/bin/postgres --version' \
		--customize-hook='test -f "$1/usr/share/postgresql/17/extension/vector.control"' \
		--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/*.log' \
		--skip=output/dev \
		"$suite" - "deb $mirror $suite main" |
		docker import \
			--change 'ENTRYPOINT ["/usr/local/bin/pg-entrypoint.sh"]' \
			--change 'CMD ["postgres"]' \
			--change 'ENV PATH=/usr/lib/postgresql/17/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
			--change 'ENV PGDATA=/var/lib/postgresql/data' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'EXPOSE 5432' \
			--change 'VOLUME /var/lib/postgresql/data' \
			--change "LABEL org.pgimageai.recipe=$recipe" \
			--message "pgimageai test image: Debian $suite, postgresql-17, pgvector" \
			-
)
image_finish "$id"
