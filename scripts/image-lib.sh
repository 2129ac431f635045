# shellcheck shell=bash
# image-lib.sh is what the image build scripts (build-test-image.sh, build-llama-image.sh)
# share: their arguments, the recipe check, mmdebstrap's installation, the mirror (read from
# the host's apt sources, so that no mirror's host name is ever written into the
# repository), and the tagging. The sourcing script sets image, keyring and the "say" and
# "die" functions first; image_begin sets force, start, old and recipe.

# image_begin parses the arguments (--force, --help) of the script $1, computes the recipe
# from the files $2..., and exits when the image exists and was built from that recipe.
image_begin() {
	local script=$1
	shift
	force=false
	local arg
	for arg in "${IMAGE_ARGS[@]}"; do
		case "$arg" in
		--force) force=true ;;
		-h | --help)
			sed -n '2,/^set -E/{/^#/s/^# \{0,1\}//p}' "$script"
			exit 0
			;;
		*) die "unknown argument: $arg (try --help)" ;;
		esac
	done
	start=$(date +%s)
	recipe=$(cat "$script" "$@" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)

	docker info >/dev/null 2>&1 || die "the Docker daemon does not answer: $(docker info 2>&1 | tail -n 3)"

	old=""
	if docker image inspect "$image" >/dev/null 2>&1; then
		old=$(docker image inspect -f '{{.Id}}' "$image")
		local have
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
}

# image_finish tags the imported image $1 as $image, removes the one it replaces, and
# reports the size and the time taken.
image_finish() {
	docker tag "$1" "$image"
	if [ -n "$old" ] && [ "$old" != "$1" ]; then
		docker rmi "$old" >/dev/null 2>&1 || say "note: the previous image $old is still in use; not removed"
	fi
	local size
	size=$(docker image inspect -f '{{.Size}}' "$image")
	say "built $image ($1, $((size / 1024 / 1024)) MiB) in $(($(date +%s) - start))s"
}

# host_mirror prints the URI of the host's main Debian archive: the first enabled "deb"
# source whose suite is a plain codename (not -security or -updates).
host_mirror() {
	if [ -n "${PGIMAGEAI_DEBIAN_MIRROR:-}" ]; then
		printf '%s\n' "$PGIMAGEAI_DEBIAN_MIRROR"
		return
	fi
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -r "$f" ] || continue
		uri=$(awk 'BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^[[:space:]]*#/ || index($i, ":") == 0) continue
					key = tolower(substr($i, 1, index($i, ":") - 1))
					val = substr($i, index($i, ":") + 1)
					if (key == "types") types = val
					else if (key == "uris") uris = val
					else if (key == "suites") suites = val
					else if (key == "enabled") enabled = val
				}
				if (enabled ~ /no/ || types !~ /(^|[[:space:]])deb([[:space:]]|$)/) next
				n = split(suites, s, /[[:space:]]+/)
				for (j = 1; j <= n; j++) if (s[j] ~ /^[a-z]+$/) {
					split(uris, u, /[[:space:]]+/)
					for (k = 1; u[k] == ""; k++) ;
					print u[k]; exit
				}
			}' "$f")
		if [ -n "$uri" ]; then
			printf '%s\n' "${uri%/}"
			return
		fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -r "$f" ] || continue
		uri=$(awk '/^[[:space:]]*deb[[:space:]]/ {
				line = $0
				sub(/^[[:space:]]*deb[[:space:]]+/, "", line)
				sub(/^\[[^]]*\][[:space:]]*/, "", line)
				split(line, w, /[[:space:]]+/)
				if (w[2] ~ /^[a-z]+$/) { print w[1]; exit }
			}' "$f")
		if [ -n "$uri" ]; then
			printf '%s\n' "${uri%/}"
			return
		fi
	done
	return 1
}

