package provider

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/pgimageai/pgimageai/internal/suggest"
)

// Factory builds a provider for one model row. It validates the row (base URL,
// options, key variable) and returns a clear error when the row is unusable.
type Factory func(m Model, env Env) (Provider, error)

// FactoryOf adapts a provider package's New to a Factory, taking care that a
// failed New yields a nil interface rather than a typed nil.
func FactoryOf[P Provider](newFn func(Model, Env) (P, error)) Factory {
	return func(m Model, env Env) (Provider, error) {
		p, err := newFn(m, env)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}

// Registry maps provider names ("openai", "local", ...) to factories. It is
// filled explicitly by main, never from init, and is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	factories map[string]Factory
	keyEnv    *KeyEnvPolicy
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{factories: make(map[string]Factory)}
}

// Register adds a factory under name; registering a name twice panics, as it
// is a programming error in main.
func (r *Registry) Register(name string, f Factory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.factories[name]; dup {
		panic("provider: Register called twice for " + name)
	}
	r.factories[name] = f
}

// AllowKeyEnv sets the policy that says which environment variables a
// model's api_key_env may name; until it is called, DefaultKeyEnvPolicy.
func (r *Registry) AllowKeyEnv(p *KeyEnvPolicy) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keyEnv = p
}

// Names returns the registered provider names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.factories))
	for n := range r.factories {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// New builds the provider of model m. A base URL that is set must pass
// ParseBaseURL, and a key variable that is named must be allowed by the
// registry's KeyEnvPolicy, whatever the provider, so that one a provider
// ignores (local) is refused too rather than silently unused. A refused
// variable is never read.
func (r *Registry) New(m Model, env Env) (Provider, error) {
	r.mu.RLock()
	f, ok := r.factories[m.Provider]
	keyEnv := r.keyEnv
	r.mu.RUnlock()
	if keyEnv == nil {
		keyEnv = DefaultKeyEnvPolicy
	}
	if !ok {
		return nil, fmt.Errorf("model %q: unknown provider %q%s; the providers are %s", m.Name, m.Provider, suggest.Hint(m.Provider, r.Names()), strings.Join(r.Names(), ", "))
	}
	if m.BaseURL != "" {
		if _, err := ParseBaseURL(m.BaseURL); err != nil {
			return nil, fmt.Errorf("model %q: %w", m.Name, err)
		}
	}
	if m.APIKeyEnv != "" {
		if err := keyEnv.Check(m.APIKeyEnv); err != nil {
			return nil, fmt.Errorf("model %q: %w", m.Name, err)
		}
	}
	p, err := f(m, env)
	if err != nil {
		return nil, fmt.Errorf("model %q: %w", m.Name, err)
	}
	return p, nil
}
