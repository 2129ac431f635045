#!/bin/bash
# build-test-image.sh builds pgimageai-postgres:MAJOR, a local stand-in for the official
# postgres:MAJOR image plus pgvector, for machines that cannot reach a container registry.
#
# The root filesystem is a Debian "essential" bootstrap (mmdebstrap) of the suite that
# carries that major version — 15 from bookworm, 17 from trixie, 18 from sid — with
# postgresql-MAJOR and, where the suite has it, postgresql-MAJOR-pgvector (bookworm has no
# pgvector package: the 15 image has none) from the Debian mirror this host already uses;
# scripts/pg-entrypoint.sh provides the official image's POSTGRES_* behaviour. The archive
# signatures are verified with the debian-archive-keyring package's keyring: it has carried
# the trixie keys since 2023.3+deb12u2, and trixie's and sid's Release files are also
# co-signed by the bookworm key, so verification works even with an older bookworm keyring.
# sid's Release file is checked without its Valid-Until date: sid is rebuilt continuously
# and a mirror's copy may be older than a week.
#
# Differences from postgres:MAJOR: locale C.UTF-8 (not en_US.utf8), the postgres user's uid is
# Debian's (not 999), and "docker stop" sends SIGTERM (smart shutdown) because docker import
# cannot set STOPSIGNAL; use "docker kill -s INT" for the official image's fast shutdown.
#
# Usage: scripts/build-test-image.sh [--force]
#   --force   rebuild even when the image exists and was built from this recipe
# Environment:
#   PGIMAGEAI_PG_MAJOR        PostgreSQL major version: 15, 17 or 18 (default 17)
#   PGIMAGEAI_BUILD_IMAGE     image name (default pgimageai-postgres:MAJOR)
#   PGIMAGEAI_DEBIAN_MIRROR   Debian mirror URI (default: the host's apt sources)
set -Eeuo pipefail

major="${PGIMAGEAI_PG_MAJOR:-17}"
image="${PGIMAGEAI_BUILD_IMAGE:-pgimageai-postgres:$major}"
# The suite of each major version, whether it has pgvector, and apt options it needs.
aptopts=()
case "$major" in
15) suite=bookworm vector=false ;;
17) suite=trixie vector=true ;;
18)
	suite=sid vector=true
	aptopts=(--aptopt='Acquire::Check-Valid-Until "false"')
	;;
*)
	printf 'build-test-image: ERROR: PGIMAGEAI_PG_MAJOR must be 15, 17 or 18, got %q\n' "$major" >&2
	exit 1
	;;
esac
packages="postgresql-$major"
vectorcheck=true
if $vector; then
	packages+=",postgresql-$major-pgvector"
	vectorcheck="test -f \"\$1/usr/share/postgresql/$major/extension/vector.control\""
fi
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
# The major version is part of the recipe: each image is checked against its own.
image_begin "${BASH_SOURCE[0]}" "$PGIMAGEAI_ENTRYPOINT" <(printf 'postgresql-%s from %s' "$major" "$suite")

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
		--include="$packages" \
		--keyring="$keyring" \
		--aptopt='Acquire::Retries "3"' \
		"${aptopts[@]}" \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--setup-hook='mkdir -p "$1/etc/postgresql-common/createcluster.d"' \
		--setup-hook='echo "create_main_cluster = false" >"$1/etc/postgresql-common/createcluster.d/pgimageai.conf"' \
		--customize-hook='install -m 0755 "$PGIMAGEAI_ENTRYPOINT" "$1/usr/local/bin/pg-entrypoint.sh"' \
		--customize-hook="chroot \"\$1\" /usr/lib/postgresql/$major/bin/postgres --version" \
		--customize-hook="$vectorcheck" \
		--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/*.log' \
		--skip=output/dev \
		"$suite" - "deb $mirror $suite main" |
		docker import \
			--change 'ENTRYPOINT ["/usr/local/bin/pg-entrypoint.sh"]' \
			--change 'CMD ["postgres"]' \
			--change "ENV PATH=/usr/lib/postgresql/$major/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
			--change 'ENV PGDATA=/var/lib/postgresql/data' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'EXPOSE 5432' \
			--change 'VOLUME /var/lib/postgresql/data' \
			--change "LABEL org.pgimageai.recipe=$recipe" \
			--message "pgimageai test image: Debian $suite, $packages" \
			-
)
image_finish "$id"
