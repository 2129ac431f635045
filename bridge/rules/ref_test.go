package rules

import (
	"testing"

	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
)

// TestRef: what an item carries of its rule is the rule's names and what
// its call key is made of — the input version included — whether the rule
// was compiled (ref made once) or not.
func TestRef(t *testing.T) {
	opts, _ := provider.ParseOptions([]byte(`{"max_image_edge": 512}`))
	var p provider.Provider = struct{ provider.TextGenerator }{}
	prompt := "Describe."
	fn, err := functions.Bind(functions.Complete, "m", p, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	r := &Rule{Config: Config{Name: "r", ImageColumn: "img", Model: "m", Prompt: prompt}, Fn: fn,
		Identity: Identity{ModelKey: "m@1", Fingerprint: "fp", Version: "v"}}
	compiled := *r
	compiled.ref = compiled.newRef()
	want := work.Rule{Name: "r", Model: "m", ModelKey: "m@1", Fingerprint: "fp", Version: "v", Fn: functions.Complete, Input: fn.InputVersion()}
	for name, rule := range map[string]*Rule{"not compiled": r, "compiled": &compiled} {
		if got := *rule.Ref(); got != want {
			t.Errorf("%s: ref %+v, want %+v", name, got, want)
		}
		if work.KeyFor(rule, prompt, []byte("img")) != work.KeyOf(functions.Complete, "m@1", fn.InputVersion(), prompt, []byte("img")) {
			t.Errorf("%s: the call key is not of the rule's function, model row and input version", name)
		}
	}
	if fn.InputVersion() == "" {
		t.Fatal("the function has no input version: the test would not tell")
	}
}
