package integration_test

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/integration"
)

// TestDemoDocker runs `pgimageai demo` with its PostgreSQL in Docker (what it does on a
// machine without server binaries; PGIMAGEAI_DEMO_SERVER=docker forces it here), from the
// suite's image: it says which image it used, captions the samples, and removes its
// container.
func TestDemoDocker(t *testing.T) {
	image := os.Getenv(integration.ImageEnv)
	if image == "" {
		image = integration.DefaultImage
	}
	integration.Shared(t) // fails (or skips under -short outside CI) without an engine, and makes sure the image is here
	d := newDemoRun(t)
	d.cmd.Env = append(d.cmd.Env, "PGIMAGEAI_DEMO_SERVER=docker", "PGIMAGEAI_DEMO_IMAGE="+image)
	d.cmd.Stdout = &d.stdout
	began := time.Now()
	if err := d.cmd.Run(); err != nil {
		t.Fatalf("pgimageai demo: %v (want exit 0)", err)
	}
	t.Logf("pgimageai demo in Docker took %s", time.Since(began).Round(time.Millisecond))
	out := d.stdout.String()
	m := regexp.MustCompile(`in Docker, container ([0-9a-f]{12}) of image (\S+) \(chosen by PGIMAGEAI_DEMO_IMAGE\), on 127\.0\.0\.1:\d+`).FindStringSubmatch(out)
	if m == nil || m[2] != image {
		t.Fatalf("the first line does not say which container and image it used (want image %s):\n%s", image, out)
	}
	if !strings.Contains(out, "removed its container "+m[1]) {
		t.Errorf("the output does not say the container was removed")
	}
	results := table(t, out, "ID")
	if len(results) != 10 || !strings.HasPrefix(results[0]["CAPTION"], "PNG image") {
		t.Errorf("results %v, want 10 rows, the first captioned as a PNG", results)
	}
	if left, err := exec.Command("docker", "ps", "-aq", "--filter", "id="+m[1]).Output(); err != nil || len(strings.TrimSpace(string(left))) > 0 {
		t.Errorf("container %s still exists (%v)", m[1], err)
	}
	d.assertCleanedUp(t)
}
