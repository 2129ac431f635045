package provider_test

import (
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
)

func TestKeyEnvPolicy(t *testing.T) {
	tests := []struct {
		name, spec, variable string
		wantErr              string // "" = allowed
	}{
		{"default allows another name", "", "OPENAI_API_KEY", ""},
		{"default refuses PGPASSWORD", "", "PGPASSWORD", "may not hold an API key"},
		{"default refuses the bridge's DSN", "", "PGIMAGEAI_DSN", "may not hold an API key"},
		{"default refuses any PGIMAGEAI_ variable", "", "PGIMAGEAI_OPENAI_KEY", "may not hold an API key"},
		{"PG refused in any case", "", "pgpassword", "may not hold an API key"},
		{"a list names it", "OPENAI_API_KEY, VOYAGE_API_KEY", "VOYAGE_API_KEY", ""},
		{"a list does not name it", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", `add it to --key-env-allow (env PGIMAGEAI_KEY_ENV_ALLOW), now "OPENAI_API_KEY"`},
		{"a glob", "*_API_KEY", "JINA_API_KEY", ""},
		{"a glob that does not match", "*_API_KEY", "JINA_TOKEN", "not allowed to hold API keys"},
		{"a glob never allows PG", "*", "PGPASSWORD", "may not hold an API key"},
		{"an exact PG name is refused all the same", "PGIMAGEAI_DSN", "PGIMAGEAI_DSN", "may not hold an API key"},
		{"character classes", "KEY_[AB]", "KEY_B", ""},
		{"empty entries ignored", ",,OPENAI_API_KEY,", "OPENAI_API_KEY", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := provider.ParseKeyEnvPolicy(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			err = p.Check(tt.variable)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Check(%s) = %v, want allowed", tt.variable, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Check(%s) = %v, want an error containing %q", tt.variable, err, tt.wantErr)
			}
		})
	}
}

func TestParseKeyEnvPolicyBadPattern(t *testing.T) {
	if _, err := provider.ParseKeyEnvPolicy("OK,[unclosed"); err == nil || !strings.Contains(err.Error(), "[unclosed") {
		t.Fatalf("err = %v, want the bad pattern named", err)
	}
}

// TestRegistryRefusesKeyEnv: a model naming a refused variable is an error
// and the variable is never read; the policy set on the registry applies to
// every provider, local included.
func TestRegistryRefusesKeyEnv(t *testing.T) {
	reg := provider.NewRegistry()
	built := 0
	var read []string
	env := func(name string) (string, bool) { read = append(read, name); return "secret", true }
	reg.Register("p", func(m provider.Model, env provider.Env) (provider.Provider, error) {
		built++
		env(m.APIKeyEnv)
		return struct{}{}, nil
	})

	if _, err := reg.New(provider.Model{Name: "m", Provider: "p", APIKeyEnv: "PGPASSWORD"}, env); err == nil || !strings.Contains(err.Error(), `model "m": api_key_env`) {
		t.Fatalf("New = %v, want the default policy's refusal", err)
	}
	p, err := provider.ParseKeyEnvPolicy("OPENAI_*")
	if err != nil {
		t.Fatal(err)
	}
	reg.AllowKeyEnv(p)
	if _, err := reg.New(provider.Model{Name: "m", Provider: "p", APIKeyEnv: "HOME"}, env); err == nil || !strings.Contains(err.Error(), "--key-env-allow") {
		t.Fatalf("New = %v, want a refusal that says how to allow it", err)
	}
	if built != 0 || len(read) != 0 {
		t.Fatalf("refused models built %d providers and read %v", built, read)
	}
	if _, err := reg.New(provider.Model{Name: "m", Provider: "p", APIKeyEnv: "OPENAI_API_KEY"}, env); err != nil || built != 1 {
		t.Fatalf("New = %v (built %d), want the allowed variable accepted", err, built)
	}
}
