package provider_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// optionKeys returns the JSON keys of a provider's options struct, those of
// embedded structs included: the keys models.options accepts.
func optionKeys(t reflect.Type, out map[string]bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				optionKeys(ft, out)
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = true
		}
	}
}

// TestConfigurationReferenceComplete: every option key a provider accepts
// is in docs/configuration.md, so a new option cannot ship undocumented.
func TestConfigurationReferenceComplete(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	configs := map[string]any{
		"shared": provider.Options{}, "openai": openai.Config{}, "local": local.Config{}, "llamacpp": llamacpp.Config{},
		"vllm": vllm.Config{}, "voyage": voyage.Config{}, "cohere": cohere.Config{}, "jina": jina.Config{},
	}
	for name, c := range configs {
		keys := map[string]bool{}
		optionKeys(reflect.TypeOf(c), keys)
		if len(keys) == 0 {
			t.Fatalf("%s: no option keys found", name)
		}
		for k := range keys {
			if !strings.Contains(string(doc), "`"+k+"`") {
				t.Errorf("option %s of %s is not in docs/configuration.md", k, name)
			}
		}
	}
}
