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

# shellcheck source=scripts/image-lib.sh
. "$here/image-lib.sh"
IMAGE_ARGS=("$@")
image_begin "${BASH_SOURCE[0]}" "$PGIMAGEAI_MODEL_SCRIPT"

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
image_finish "$id"
