package calls

import (
	"errors"
	"testing"

	"github.com/pgimageai/pgimageai/bridge/rules"
	"github.com/pgimageai/pgimageai/bridge/work"
	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

var batchPNG = []byte{0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3}

// completeRule is an AI_IMAGE_COMPLETE rule of model m with prompt "p", on
// a provider that is never called.
func completeRule(t testing.TB) *rules.Rule {
	t.Helper()
	opts, _ := provider.ParseOptions(nil)
	var p provider.Provider = struct{ provider.TextGenerator }{}
	prompt := "p"
	f, err := functions.Bind(functions.Complete, "m", p, opts, &prompt)
	if err != nil {
		t.Fatal(err)
	}
	return &rules.Rule{Config: rules.Config{Name: "r", Model: "m", Prompt: prompt}, Fn: f}
}

// TestAnsweredCall: a batch answer serves a backfill row only when it
// answers the row's current input; a failed line is the errors row the
// synchronous failure would give.
func TestAnsweredCall(t *testing.T) {
	r := completeRule(t)
	r.ModelKey = "m@1"
	cl := &Caller{workers: workers{sp: testSpawner(t)}}
	k := work.KeyFor(r, "p", batchPNG)
	text := "a caption"
	other := work.KeyFor(r, "p", append(append([]byte{}, batchPNG...), 9))
	tests := []struct {
		name     string
		answer   *state.BatchAnswer
		wantNil  bool
		wantText string
		reason   functions.Reason
	}{
		{name: "no answer", wantNil: true},
		{name: "answer of an older input", answer: &state.BatchAnswer{InputKey: other[:], Answer: &text}, wantNil: true},
		{name: "answer of the current input", answer: &state.BatchAnswer{InputKey: k[:], Answer: &text, PromptTokens: 11, CompletionTokens: 5}, wantText: text},
		{name: "failed line", answer: &state.BatchAnswer{InputKey: k[:], Reason: "provider_error", Detail: "model m: HTTP 400: bad", Status: 400}, reason: functions.ProviderError},
		{name: "unusable answer", answer: &state.BatchAnswer{InputKey: k[:], Reason: "bad_response", Detail: "model m: no choices"}, reason: functions.BadResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cl.Answered(r, batchPNG, "p", tt.answer, nil)
			if (c == nil) != tt.wantNil {
				t.Fatalf("call = %v, want nil %v", c, tt.wantNil)
			}
			if c == nil {
				return
			}
			<-c.Done
			if c.Key == nil || *c.Key != k || c.Hit || c.Unchanged {
				t.Errorf("call key %x hit %v unchanged %v", c.Key, c.Hit, c.Unchanged)
			}
			if tt.reason == "" {
				if c.Err != nil || c.Result.Text != tt.wantText || c.Result.Usage != (provider.Usage{PromptTokens: 11, CompletionTokens: 5}) {
					t.Errorf("result %+v, err %v", c.Result, c.Err)
				}
				return
			}
			var fe *functions.Error
			if !errors.As(c.Err, &fe) || fe.Reason != tt.reason || fe.Detail != tt.answer.Detail || fe.ImageBytes != len(batchPNG) ||
				!c.Result.Null || !functions.Permanent(c.Err) {
				t.Errorf("err %v (%+v), result %+v; want %s, permanent", c.Err, fe, c.Result, tt.reason)
			}
		})
	}
}
