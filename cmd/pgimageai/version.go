package main

import (
	"fmt"
	"runtime/debug"

	"github.com/pgimageai/pgimageai/normalize"
)

// release is the version of this source tree: the newest entry of
// CHANGELOG.md (a test holds the two together). A build may name itself
// otherwise with -ldflags "-X main.buildVersion=…" (scripts/build-image.sh
// and the Dockerfile pass `git describe` when there is a checkout).
const release = "0.9.0"

// buildVersion is set by the linker; "" = release.
var buildVersion string

// versionName is the version the build names: buildVersion, else release,
// with the VCS revision when Go recorded one (a build from a checkout).
func versionName() string {
	v := buildVersion
	if v == "" {
		v = release
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "-modified"
			}
		}
	}
	if rev != "" && buildVersion == "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += "+" + rev + modified
	}
	return v
}

// version is what --version prints: the version, the Go that built it and
// the image backend (libvips, or pure Go and WebAssembly).
func version() string {
	goVersion := "unknown Go"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("pgimageai %s, %s, images: %s\n", versionName(), goVersion, normalize.Backend())
}
