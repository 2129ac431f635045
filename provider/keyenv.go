package provider

import (
	"fmt"
	"path"
	"strings"
)

// KeyEnvSetting names the setting that chooses which environment variables
// may hold keys, as flag and environment variable, for messages.
const KeyEnvSetting = "--key-env-allow (env PGIMAGEAI_KEY_ENV_ALLOW)"

// KeyEnvPolicy says which environment variables a model's api_key_env may
// name. Whoever can write pgimageai.models chooses both the variable and the
// base URL its value is sent to, so a variable that holds another secret —
// PGPASSWORD, the bridge's own DSN — must not be nameable.
//
// A variable is allowed when it matches one of the policy's patterns
// (path.Match globs: * ? [a-z]) and is not refused outright: every name
// starting with PG (libpq's and pgx's PG* variables, and every PGIMAGEAI_*
// setting of the bridge) is refused whatever the patterns say. The zero
// value, and DefaultKeyEnvPolicy, allow every other name.
//
// A KeyEnvPolicy is immutable and safe for concurrent use.
type KeyEnvPolicy struct {
	patterns []string // nil = every name
}

// refusedPrefix starts every variable that can never hold a key: libpq's
// and pgx's connection settings (PGPASSWORD, PGHOST, PGSSLKEY, …) and the
// bridge's own (PGIMAGEAI_DSN, PGIMAGEAI_TARGET_DSN, …).
const refusedPrefix = "PG"

// DefaultKeyEnvPolicy allows every variable not refused outright.
var DefaultKeyEnvPolicy = &KeyEnvPolicy{}

// ParseKeyEnvPolicy parses the setting's value: comma-separated variable
// names or glob patterns, e.g. "OPENAI_API_KEY,*_API_KEY". Empty (or only
// spaces) is DefaultKeyEnvPolicy. A pattern path.Match rejects is an error.
func ParseKeyEnvPolicy(spec string) (*KeyEnvPolicy, error) {
	var pats []string
	for _, p := range strings.Split(spec, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("key variable pattern %q: %v", p, err)
		}
		pats = append(pats, p)
	}
	if len(pats) == 0 {
		return DefaultKeyEnvPolicy, nil
	}
	return &KeyEnvPolicy{patterns: pats}, nil
}

// Check returns nil when api_key_env may name the variable name, else an
// error that says why and how to allow another variable.
func (p *KeyEnvPolicy) Check(name string) error {
	if strings.HasPrefix(strings.ToUpper(name), refusedPrefix) {
		return fmt.Errorf("api_key_env: environment variable %s may not hold an API key: variables starting with PG are the database's and the bridge's own settings; put the key in another variable (e.g. OPENAI_API_KEY) and name that one", name)
	}
	if p == nil || p.patterns == nil {
		return nil
	}
	for _, pat := range p.patterns {
		if ok, _ := path.Match(pat, name); ok {
			return nil
		}
	}
	return fmt.Errorf("api_key_env: environment variable %s is not allowed to hold API keys; to allow it, add it to %s, now %q",
		name, KeyEnvSetting, p.String())
}

// String returns the policy as its setting's value ("" = the default).
func (p *KeyEnvPolicy) String() string {
	if p == nil {
		return ""
	}
	return strings.Join(p.patterns, ",")
}
