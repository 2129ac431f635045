package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/normalize"
)

// TestReleaseIsChangelogs holds the release constant and the newest numbered
// entry of CHANGELOG.md together.
func TestReleaseIsChangelogs(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no numbered release")
	}
	if string(m[1]) != release {
		t.Fatalf("CHANGELOG.md's newest release is %s, the binary says %s", m[1], release)
	}
}

func TestVersion(t *testing.T) {
	v := version()
	if !strings.HasPrefix(v, "pgimageai "+release) || strings.Contains(v, "(devel)") {
		t.Fatalf("version() = %q, want pgimageai %s…", v, release)
	}
	if !strings.Contains(v, ", images: "+normalize.Backend()) {
		t.Fatalf("version() = %q does not name the image backend (%s)", v, normalize.Backend())
	}
	old := buildVersion
	t.Cleanup(func() { buildVersion = old })
	buildVersion = "1.2.3-rc1"
	if got := versionName(); got != "1.2.3-rc1" {
		t.Fatalf("versionName() with -X main.buildVersion = %q", got)
	}
}
