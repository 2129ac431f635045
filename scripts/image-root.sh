#!/bin/bash
# image-root.sh lays out the file tree of pgimageai's container image in a directory:
# the binary, and, when it is a cgo build (which opens libvips at run time), exactly what it
# loads from this machine: the shared libraries of its ldd closure, the dynamic loader,
# libvips.so.42 and its closure, libvips's HEIF module (the only module copied: libvips
# loads every module in its directory, and the others, ImageMagick, PDF, OpenSlide, JPEG
# XL, are not wanted) and that module's own closure, with an ld.so.cache made for the tree. Then the CA
# bundle, the non-root user pgimageai (65532:65532) and /tmp (1777). scripts/build-image.sh
# and the Dockerfile both call it, so that the two images hold the same tree.
#
# Usage: scripts/image-root.sh ROOT BINARY CA_FILE
set -Eeuo pipefail
PATH=$PATH:/usr/sbin:/sbin # ldconfig, for a user whose PATH lacks them
root=$1 bin=$2 ca=$3

mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
install -m 0755 "$bin" "$root/usr/local/bin/pgimageai"

# copy_closure FILE...: each file and every library ldd says it loads, at the path the
# loader finds it by, symlinks resolved into plain files.
copy_closure() {
	local f lib
	for f in "$@"; do
		mkdir -p "$root$(dirname "$f")"
		cp -L "$f" "$root$f"
		while read -r lib; do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done < <(ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }')
	done
}

if ldd "$bin" >/dev/null 2>&1; then
	libs=$(ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\/.*ld-linux/ { print $1 }')
	# shellcheck disable=SC2086
	copy_closure $libs
	# The binary opens libvips.so.42 with dlopen at the first JPEG, HEIC or AVIF: ldd does
	# not list it, so it and its closure are copied by name.
	vips=$(ldconfig -p | awk '$1 == "libvips.so.42" && $NF ~ /^\// && !found { print $NF; found = 1 }')
	[ -n "$vips" ] || { echo "image-root: no libvips.so.42 on this machine (apt-get install libvips42)" >&2; exit 1; }
	copy_closure "$vips"
	heif=$(compgen -G "$(dirname "$(readlink -f "$vips")")/vips-modules-8.*/vips-heif.so" | head -n 1 || true)
	[ -n "$heif" ] || { echo "image-root: no vips-heif.so beside $vips (apt-get install libvips42)" >&2; exit 1; }
	copy_closure "$heif"
	# Every directory holding a copied library, for the tree's own loader cache.
	find "$root" -path "$root/etc" -prune -o -name '*.so*' -type f -printf '%h\n' | sed "s|^$root||" | sort -u >"$root/etc/ld.so.conf"
	ldconfig -r "$root"
	rm -f "$root/etc/ld.so.conf"
fi

install -m 0644 "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\npgimageai:x:65532:65532:pgimageai:/nonexistent:/sbin/nologin\n' >"$root/etc/passwd"
printf 'root:x:0:\npgimageai:x:65532:\n' >"$root/etc/group"
find "$root" -type d -exec chmod 0755 {} +
chmod 0644 "$root/etc/passwd" "$root/etc/group"
chmod 1777 "$root/tmp"
