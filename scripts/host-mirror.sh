# shellcheck shell=bash
# host-mirror.sh is sourced by the image build scripts (build-test-image.sh,
# build-llama-image.sh). It defines host_mirror, so that no mirror's host name is ever
# written into the repository: the images come from the archive this host already uses.

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

