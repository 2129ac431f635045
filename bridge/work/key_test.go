package work

import (
	"testing"

	"github.com/pgimageai/pgimageai/functions"
)

// TestKeyFor: the call key of a rule is made of its function, model row,
// input version (the normalisation settings), prompt and image bytes — a
// change of any one is another key — and of nothing else.
func TestKeyFor(t *testing.T) {
	base := &Rule{Name: "r", Model: "m", ModelKey: "m@1", Fingerprint: "f", Version: "v", Fn: functions.Complete, Input: "norm:1"}
	with := func(f func(r *Rule)) *Rule { r := *base; f(&r); return &r }
	prompt, img := "Describe.", []byte{0x89, 'P', 'N', 'G'}
	tests := []struct {
		name   string
		rule   *Rule
		prompt string
		img    []byte
		same   bool
	}{
		{name: "the same call", rule: with(func(*Rule) {}), prompt: prompt, img: img, same: true},
		{name: "another rule name, version, fingerprint", rule: with(func(r *Rule) { r.Name, r.Version, r.Fingerprint, r.Model = "s", "w", "g", "n" }), prompt: prompt, img: img, same: true},
		{name: "another normalisation version", rule: with(func(r *Rule) { r.Input = "norm:2" }), prompt: prompt, img: img},
		{name: "no normalisation version", rule: with(func(r *Rule) { r.Input = "" }), prompt: prompt, img: img},
		{name: "another model row", rule: with(func(r *Rule) { r.ModelKey = "m@2" }), prompt: prompt, img: img},
		{name: "another function", rule: with(func(r *Rule) { r.Fn = functions.Embed }), prompt: prompt, img: img},
		{name: "another prompt", rule: base, prompt: "Tag.", img: img},
		{name: "another image", rule: base, prompt: prompt, img: []byte{0x89, 'P', 'N', 'H'}},
		{name: "bytes moved from prompt to image", rule: base, prompt: "Describe", img: append([]byte("."), img...)},
	}
	want := KeyFor(base, prompt, img)
	if want != KeyOf(functions.Complete, "m@1", "norm:1", prompt, img) {
		t.Fatal("KeyFor is not KeyOf of the rule's function, model row and input version")
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := KeyFor(tc.rule, tc.prompt, tc.img); (got == want) != tc.same {
				t.Errorf("same key = %v, want %v", got == want, tc.same)
			}
		})
	}
}
