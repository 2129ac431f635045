package provider

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

type fakeGenerator struct{ TextGenerator }

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	r.Register("zeta", func(Model, Env) (Provider, error) { return fakeGenerator{}, nil })
	r.Register("alpha", func(Model, Env) (Provider, error) { return nil, errors.New("bad base_url") })

	if got := r.Names(); !reflect.DeepEqual(got, []string{"alpha", "zeta"}) {
		t.Errorf("Names = %v, want sorted [alpha zeta]", got)
	}

	tests := []struct {
		name     string
		provider string
		baseURL  string
		wantErr  []string // substrings
	}{
		{name: "known", provider: "zeta"},
		{name: "http base URL passed on", provider: "zeta", baseURL: "http://127.0.0.1:11434/v1"},
		{name: "base URL checked for a provider that ignores it", provider: "zeta", baseURL: "file:///etc/passwd",
			wantErr: []string{`model "m"`, `scheme must be http or https, got "file"`}},
		{name: "credentials refused before the factory runs", provider: "zeta", baseURL: "http://u:hunter2@h/v1",
			wantErr: []string{`model "m"`, "must not contain credentials"}},
		{name: "unknown lists known names", provider: "antropic",
			wantErr: []string{`model "m"`, `unknown provider "antropic"`, "alpha", "zeta"}},
		{name: "factory error wrapped with model name", provider: "alpha",
			wantErr: []string{`model "m"`, "bad base_url"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := r.New(Model{Name: "m", Provider: tt.provider, BaseURL: tt.baseURL}, nil)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := p.(TextGenerator); !ok {
					t.Fatalf("provider %T is not a TextGenerator", p)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("err = %q shows the password", err)
			}
			for _, s := range tt.wantErr {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %q, want it to contain %q", err, s)
				}
			}
		})
	}
}

func TestRegistryDuplicatePanics(t *testing.T) {
	r := NewRegistry()
	f := func(Model, Env) (Provider, error) { return fakeGenerator{}, nil }
	r.Register("openai", f)
	defer func() {
		v := recover()
		if v == nil || !strings.Contains(v.(string), "openai") {
			t.Fatalf("recover() = %v, want a panic naming openai", v)
		}
	}()
	r.Register("openai", f)
}
