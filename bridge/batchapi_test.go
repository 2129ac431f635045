package bridge

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

var batchPNG = []byte{0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 1, 2, 3}

func TestCustomIDRoundTrip(t *testing.T) {
	k := keyOf(functions.Complete, "m@1", "p", batchPNG)
	for _, key := range []string{`{"id": 1}`, `{"path": "a/b c", "n": 2}`} {
		input, got, ok := parseCustomID(customID(k, []byte(key)))
		if !ok || !bytes.Equal(input, k[:]) || string(got) != key {
			t.Errorf("%s: parsed %x %q %v", key, input, got, ok)
		}
	}
	for _, bad := range []string{"", "nohex", "zz/{}", "abcd/{}", string(make([]byte, 64)) + "/{}", customID(k, []byte("{not json"))} {
		if _, _, ok := parseCustomID(bad); ok {
			t.Errorf("parseCustomID(%q) accepted", bad)
		}
	}
}

// TestAnsweredCall: a batch answer serves a backfill row only when it
// answers the row's current input; a failed line is the errors row the
// synchronous failure would give.
func TestAnsweredCall(t *testing.T) {
	r := testRule(t, functions.Complete, 0)
	r.ModelKey = "m@1"
	e := &engine{callCtx: context.Background()}
	k := keyOf(functions.Complete, r.ModelKey, "p", batchPNG)
	text := "a caption"
	other := keyOf(functions.Complete, r.ModelKey, "p", append(append([]byte{}, batchPNG...), 9))
	row := pageRow{keyJSON: []byte(`{"id": 1}`), img: batchPNG, valid: true, size: len(batchPNG), prompt: "p"}
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
			row := row
			row.answer = tt.answer
			c := e.answeredCall(r, row, nil)
			if (c == nil) != tt.wantNil {
				t.Fatalf("call = %v, want nil %v", c, tt.wantNil)
			}
			if c == nil {
				return
			}
			<-c.done
			if c.key == nil || *c.key != k || c.hit || c.unchanged {
				t.Errorf("call key %x hit %v unchanged %v", c.key, c.hit, c.unchanged)
			}
			if tt.reason == "" {
				if c.err != nil || c.result.Text != tt.wantText || c.result.Usage != (provider.Usage{PromptTokens: 11, CompletionTokens: 5}) {
					t.Errorf("result %+v, err %v", c.result, c.err)
				}
				return
			}
			var fe *functions.Error
			if !errors.As(c.err, &fe) || fe.Reason != tt.reason || fe.Detail != tt.answer.Detail || fe.ImageBytes != len(batchPNG) ||
				!c.result.Null || !functions.Permanent(c.err) {
				t.Errorf("err %v (%+v), result %+v; want %s, permanent", c.err, fe, c.result, tt.reason)
			}
		})
	}
}
