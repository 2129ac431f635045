package llamacpp

import (
	"encoding/json"
	"testing"
)

// FuzzAnswer feeds arbitrary bodies to the answer decoder: it must never
// panic, and every vector it accepts is non-empty.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		`{"data":[{"index":0,"embedding":[1,2,3]}],"usage":{"prompt_tokens":3}}`,
		`[{"index":0,"embedding":[[1,2,3]]}]`,
		`[{"index":0,"embedding":[[1],[2]]}]`,
		`[{"embedding":[ ]}]`, `[]`, `{}`, `[{"index":-1,"embedding":[1]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var a answer
		if json.Unmarshal(body, &a) != nil {
			return
		}
		vecs, err := a.vectors(1)
		if err != nil {
			return
		}
		if len(vecs) != 1 || len(vecs[0]) == 0 {
			t.Fatalf("accepted %q as %v", body, vecs)
		}
	})
}
