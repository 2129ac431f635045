package deploy

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads ../compose.yaml with the Compose specification's own loader (schema
// validation, interpolation, anchors and merges, dependency checks), as docker compose does.
func loadCompose(t *testing.T, env map[string]string) *types.Project {
	t.Helper()
	return loadComposeFile(t, "../compose.yaml", env)
}

// loadComposeFile loads one Compose file of the repository as loadCompose does.
func loadComposeFile(t *testing.T, file string, env map[string]string) *types.Project {
	t.Helper()
	ctx := context.Background()
	details, err := loader.LoadConfigFiles(ctx, []string{file}, "..")
	if err != nil {
		t.Fatal(err)
	}
	details.Environment = env
	p, err := loader.LoadWithContext(ctx, *details, func(o *loader.Options) { o.SetProjectName("pgimageai", true) })
	if err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	return p
}

func TestCompose(t *testing.T) {
	p := loadCompose(t, map[string]string{})

	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"configure", "migrate", "ollama", "ollama-pull", "pgimageai", "postgres"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	pg, bridge, migrate := p.Services["postgres"], p.Services["pgimageai"], p.Services["migrate"]

	// PostgreSQL 17 with pgvector, logical decoding, data on a volume.
	if !strings.Contains(pg.Image, "pgvector") || !strings.HasSuffix(pg.Image, "pg17") {
		t.Errorf("postgres image %q, want PostgreSQL 17 with pgvector", pg.Image)
	}
	if !slices.Contains(pg.Command, "wal_level=logical") {
		t.Errorf("postgres command %v lacks wal_level=logical", pg.Command)
	}
	if !hasVolume(pg, "pgdata", "/var/lib/postgresql/data") {
		t.Errorf("postgres keeps its data off the pgdata volume: %+v", pg.Volumes)
	}
	if _, ok := p.Volumes["pgdata"]; !ok {
		t.Error("volume pgdata is not declared")
	}

	// Health checks on every long-running service; the bridge's runs pgimageai health,
	// since its image has no shell and no curl.
	for _, name := range []string{"postgres", "ollama", "pgimageai"} {
		hc := p.Services[name].HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) < 2 || hc.Test[0] != "CMD" {
			t.Errorf("service %s: health check %+v, want an exec-form CMD", name, hc)
		}
	}
	if hc := bridge.HealthCheck; hc != nil && !slices.Equal(hc.Test, types.HealthCheckTest{"CMD", "/usr/local/bin/pgimageai", "health"}) {
		t.Errorf("pgimageai health check %v, want pgimageai health", hc.Test)
	}

	// One-shots: migrate before the bridge, the model pulled before the bridge calls it.
	for _, name := range []string{"migrate", "configure", "ollama-pull"} {
		if r := p.Services[name].Restart; r != "no" {
			t.Errorf("one-shot %s restarts %q, want no", name, r)
		}
	}
	if !slices.Equal(migrate.Command, types.ShellCommand{"migrate"}) || migrate.Image != bridge.Image {
		t.Errorf("migrate: image %q command %v, want the bridge's image %q running migrate", migrate.Image, migrate.Command, bridge.Image)
	}
	wantDeps := map[string]map[string]string{
		"migrate":     {"postgres": types.ServiceConditionHealthy},
		"configure":   {"migrate": types.ServiceConditionCompletedSuccessfully},
		"ollama-pull": {"ollama": types.ServiceConditionHealthy},
		"pgimageai": {
			"postgres":    types.ServiceConditionHealthy,
			"migrate":     types.ServiceConditionCompletedSuccessfully,
			"configure":   types.ServiceConditionCompletedSuccessfully,
			"ollama-pull": types.ServiceConditionCompletedSuccessfully,
		},
	}
	for svc, deps := range wantDeps {
		got := p.Services[svc].DependsOn
		if len(got) != len(deps) {
			t.Errorf("%s depends on %v, want %v", svc, got, deps)
		}
		for dep, cond := range deps {
			if got[dep].Condition != cond {
				t.Errorf("%s depends on %s with %q, want %q", svc, dep, got[dep].Condition, cond)
			}
		}
	}

	// The bridge: metrics on the port its health check asks, memory limit above the
	// byte budget plus the binary's headroom.
	env := bridge.Environment
	if v := env["PGIMAGEAI_METRICS_ADDR"]; v == nil || *v != ":9187" {
		t.Errorf("PGIMAGEAI_METRICS_ADDR %v, want :9187", v)
	}
	if !strings.Contains(*env["PGIMAGEAI_DSN"], "@postgres:5432/") {
		t.Errorf("PGIMAGEAI_DSN %q does not reach the postgres service", *env["PGIMAGEAI_DSN"])
	}
	budget := mustSize(t, *env["PGIMAGEAI_BYTE_BUDGET"])
	if limit := int64(bridge.MemLimit); limit < budget+headroom+budget/4 {
		t.Errorf("mem_limit %d below the byte budget %d + %d headroom + a quarter", limit, budget, headroom)
	}
	if bridge.Build == nil || bridge.Build.Context == "" {
		t.Error("pgimageai has no build context: compose up could not build the image")
	}
	// The model the rule uses is the one pulled.
	if !slices.Equal(p.Services["ollama-pull"].Entrypoint, types.ShellCommand{"ollama", "pull", "llava"}) {
		t.Errorf("ollama-pull runs %v, want ollama pull llava", p.Services["ollama-pull"].Entrypoint)
	}

	// Interpolation: the password and the image come from the environment.
	p2 := loadCompose(t, map[string]string{"POSTGRES_PASSWORD": "s3cret", "PGIMAGEAI_BRIDGE_PASSWORD": "br1dge",
		"PGIMAGEAI_IMAGE": "registry.example/pgimageai:1.0"})
	if b := p2.Services["pgimageai"]; b.Image != "registry.example/pgimageai:1.0" || !strings.Contains(*b.Environment["PGIMAGEAI_DSN"], ":br1dge@") {
		t.Errorf("interpolation: image %q, DSN %q", b.Image, *b.Environment["PGIMAGEAI_DSN"])
	}
	if m := p2.Services["migrate"]; !strings.Contains(*m.Environment["PGIMAGEAI_DSN"], "postgres:s3cret@") {
		t.Errorf("interpolation: migrate's DSN %q", *m.Environment["PGIMAGEAI_DSN"])
	}
}

func hasVolume(s types.ServiceConfig, source, target string) bool {
	for _, v := range s.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source == source && v.Target == target {
			return true
		}
	}
	return false
}

// TestComposeOffline: compose.offline.yaml needs no registry — only the images the
// project builds from Debian packages — and no network: its model is the local provider.
func TestComposeOffline(t *testing.T) {
	p := loadComposeFile(t, "../compose.offline.yaml", map[string]string{})
	var names []string
	for name := range p.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	if want := []string{"configure", "migrate", "pgimageai", "postgres"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	local := map[string]bool{"pgimageai:dev": true, "pgimageai-postgres:17": true}
	for name, s := range p.Services {
		if !local[s.Image] {
			t.Errorf("service %s uses image %q, not one the project builds offline", name, s.Image)
		}
		if s.Build != nil {
			t.Errorf("service %s builds from a Dockerfile, which needs the Go module proxy in the build", name)
		}
	}
	if !slices.Contains(p.Services["postgres"].Command, "wal_level=logical") {
		t.Error("postgres runs without wal_level=logical")
	}
	sql, err := os.ReadFile("compose/configure-offline.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sql), "'local', 'local'") || strings.Contains(string(sql), "http") {
		t.Errorf("configure-offline.sql does not configure the offline local provider:\n%s", sql)
	}
	if hc := p.Services["pgimageai"].HealthCheck; hc == nil || !slices.Contains(hc.Test, "health") {
		t.Error("the bridge has no pgimageai health check")
	}
}
