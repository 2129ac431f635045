#!/bin/bash
# build-seaweedfs.sh builds SeaweedFS's weed (Apache-2.0), the real S3-compatible server of
# the store tests (store/storetest), from its source on the Go module proxy, into a cache
# that outlives the checkout; a no-op when the binary for this version is there.
#
# "go install module@version" refuses SeaweedFS (its go.mod has replace directives), so the
# module is downloaded with "go mod download", copied out of the read-only module cache and
# built in place with its own go.mod: the versions its authors pinned. The version is
# storetest.WeedVersion (store/storetest/seaweedfs.go), read from there.
#
# A build takes about 7 minutes of CPU on 2 cores and gives a binary of about 230 MB; the
# Go build cache makes a rebuild faster.
#
# Usage: scripts/build-seaweedfs.sh [--force]
#   prints the binary's path on stdout
# Environment:
#   XDG_CACHE_HOME   the cache is ${XDG_CACHE_HOME:-$HOME/.cache}/pgimageai/weed-VERSION
set -Eeuo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { printf 'build-seaweedfs: %s\n' "$*" >&2; }

version=$(sed -n 's/^const WeedVersion = "\(.*\)"$/\1/p' store/storetest/seaweedfs.go)
[ -n "$version" ] || { say "ERROR: no WeedVersion in store/storetest/seaweedfs.go"; exit 1; }
dest="${XDG_CACHE_HOME:-$HOME/.cache}/pgimageai/weed-$version"
bin="$dest/weed"

if [ "${1:-}" != --force ] && [ -x "$bin" ] && "$bin" version >/dev/null 2>&1; then
	printf '%s\n' "$bin"
	exit 0
fi

start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
say "downloading github.com/seaweedfs/seaweedfs@$version"
dir=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" |
	sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
[ -d "$dir" ] || { say "ERROR: go mod download gave no module directory"; exit 1; }
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
say "building weed (minutes)"
(cd "$work/src" && go build -trimpath -o "$work/weed" ./weed)
"$work/weed" version >/dev/null
mkdir -p "$dest"
mv "$work/weed" "$bin.tmp.$$"
mv "$bin.tmp.$$" "$bin"
say "built $bin ($(stat -c %s "$bin") bytes) in $(($(date +%s) - start))s"
printf '%s\n' "$bin"
