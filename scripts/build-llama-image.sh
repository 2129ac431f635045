#!/bin/bash
# build-llama-image.sh builds pgimageai-llama:test, a real llama.cpp llama-server for the
# integration tests, from Debian packages only: llama.cpp-tools (llama-server with mtmd, the
# multimodal library that decodes images with stb_image) and python3-gguf, which writes a
# tiny random-weight vision model at build time (scripts/llama-tiny-model.py: a 'llama'
# language model and a CLIP projector, a few hundred KiB; nothing is downloaded).
#
# The root filesystem is a Debian sid "essential" bootstrap (mmdebstrap), from the Debian
# mirror this host already uses (scripts/host-mirror.sh); llama.cpp-tools is in sid only.
# A mirror may serve an old snapshot of sid whose Release file has expired, hence
# Acquire::Check-Valid-Until "false"; the signatures are still verified.
#
# The image runs llama-server on port 8080 with --embeddings and mean pooling, so that one
# server answers both /v1/chat/completions and /v1/embeddings (and /embeddings, /props).
#
# Usage: scripts/build-llama-image.sh [--force]
#   --force   rebuild even when the image exists and was built from this recipe
# Environment:
#   PGIMAGEAI_LLAMA_IMAGE     image name (default pgimageai-llama:test)
#   PGIMAGEAI_DEBIAN_MIRROR   Debian mirror URI (default: the host's apt sources)
set -Eeuo pipefail

image="${PGIMAGEAI_LLAMA_IMAGE:-pgimageai-llama:test}"
suite=sid
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PGIMAGEAI_MODEL_SCRIPT="$here/llama-tiny-model.py"

say() { printf 'build-llama-image: %s\n' "$*" >&2; }
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

# shellcheck source=scripts/host-mirror.sh
. "$here/host-mirror.sh"

recipe=$(cat "${BASH_SOURCE[0]}" "$PGIMAGEAI_MODEL_SCRIPT" "$here/host-mirror.sh" | sha256sum | cut -c1-16)

docker info >/dev/null 2>&1 || die "the Docker daemon does not answer: $(docker info 2>&1 | tail -n 3)"

old=""
if docker image inspect "$image" >/dev/null 2>&1; then
	old=$(docker image inspect -f '{{.Id}}' "$image")
	have=$(docker image inspect -f '{{index .Config.Labels "org.pgimageai.recipe"}}' "$image")
	if ! $force && [ "$have" = "$recipe" ]; then
		say "$image exists (recipe $recipe); nothing to do (use --force to rebuild)"
		exit 0
	fi
	if ! $force; then
		say "$image exists but was built from another recipe (${have:-none}, now $recipe); rebuilding"
	fi
fi

if ! command -v mmdebstrap >/dev/null || [ ! -s "$keyring" ]; then
	[ "$(id -u)" = 0 ] || die "mmdebstrap or $keyring is missing; run as root or: sudo apt-get install mmdebstrap debian-archive-keyring"
	say "installing mmdebstrap and debian-archive-keyring"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap debian-archive-keyring
fi

mirror=$(host_mirror) || die "no Debian mirror found in /etc/apt/sources*; set PGIMAGEAI_DEBIAN_MIRROR"
say "building $image from Debian $suite at $mirror (recipe $recipe)"

# The customize hooks write the model into /models with the image's own python3-gguf, check
# that llama-server runs, and drop caches. The tarball goes straight into "docker import";
# the image is tagged only if both succeed.
# shellcheck disable=SC2016 # mmdebstrap expands $1 (the chroot) in the hooks itself.
id=$(
	mmdebstrap \
		--variant=essential \
		--include=llama.cpp-tools,python3-gguf \
		--keyring="$keyring" \
		--aptopt='Acquire::Retries "3"' \
		--aptopt='Acquire::Check-Valid-Until "false"' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--customize-hook='install -m 0755 "$PGIMAGEAI_MODEL_SCRIPT" "$1/usr/local/bin/llama-tiny-model.py"' \
		--customize-hook='mkdir -p "$1/models" && chroot "$1" python3 /usr/local/bin/llama-tiny-model.py /models' \
		--customize-hook='test -s "$1/models/tiny-llm.gguf" && test -s "$1/models/tiny-mmproj.gguf"' \
		--customize-hook='chroot "$1" llama-server --version' \
		--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/log/*.log' \
		--skip=output/dev \
		"$suite" - "deb $mirror $suite main" |
		docker import \
			--change 'ENTRYPOINT ["llama-server", "--model", "/models/tiny-llm.gguf", "--mmproj", "/models/tiny-mmproj.gguf", "--host", "0.0.0.0", "--port", "8080", "--embeddings", "--pooling", "mean", "--ctx-size", "2048", "--threads", "1"]' \
			--change 'ENV LANG=C.UTF-8' \
			--change 'EXPOSE 8080' \
			--change "LABEL org.pgimageai.recipe=$recipe" \
			--message "pgimageai test image: Debian $suite, llama.cpp-tools, a tiny random-weight vision model" \
			-
)
docker tag "$id" "$image"
if [ -n "$old" ] && [ "$old" != "$id" ]; then
	docker rmi "$old" >/dev/null 2>&1 || say "note: the previous image $old is still in use; not removed"
fi

size=$(docker image inspect -f '{{.Size}}' "$image")
say "built $image ($id, $((size / 1024 / 1024)) MiB) in $(($(date +%s) - start))s"
