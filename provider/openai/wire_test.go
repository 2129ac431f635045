package openai

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
)

// userMsg is the expected user message: the text part first, then the image.
func userMsg(text, url, detail string) string {
	img := `{"url":"` + url + `"}`
	if detail != "" {
		img = `{"url":"` + url + `","detail":"` + detail + `"}`
	}
	t, _ := json.Marshal(text)
	return `{"role":"user","content":[{"type":"text","text":` + string(t) + `},{"type":"image_url","image_url":` + img + `}]}`
}

// TestRequestJSON checks the exact body of a vision call, key presence
// included, against OpenAI's Chat Completions reference
// (https://platform.openai.com/docs/api-reference/chat/create: content
// parts {"type":"text"} and {"type":"image_url","image_url":{"url","detail"}};
// response_format {"type":"json_schema","json_schema":{"name","schema"}}).
// integration/llama_test.go sends the same body to a real llama-server.
// go-openai always sends "stream":false, which every OpenAI-compatible
// server accepts.
func TestRequestJSON(t *testing.T) {
	tests := []struct {
		name     string
		options  string
		basePath string // appended to the server URL
		keyEnv   string
		img      provider.Image
		prompt   string
		wantPath string
		wantAuth string // "" = no Authorization header
		wantBody string
	}{
		{
			name: "minimal, no key", options: `{}`, basePath: "/v1", img: pngImage, prompt: "Describe the image.",
			wantPath: "/v1/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"messages":[` + userMsg("Describe the image.", pngURL, "") + `]}`,
		},
		{
			name: "empty prompt keeps the text part and its text", options: ``, basePath: "/v1", img: pngImage, prompt: "",
			wantPath: "/v1/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"messages":[` + userMsg("", pngURL, "") + `]}`,
		},
		{
			name:     "system prompt, detail, temperature 0, max_tokens, top_p, key",
			options:  `{"system_prompt":"You are terse.","detail":"low","temperature":0,"max_tokens":300,"top_p":0.9}`,
			basePath: "/api/v1/", keyEnv: "OPENAI_API_KEY", img: jpegImage, prompt: "What is it?",
			wantPath: "/api/v1/chat/completions", wantAuth: "Bearer sk-test-123",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"max_tokens":300,"temperature":0,"top_p":0.9,"messages":[` +
				`{"role":"system","content":"You are terse."},` + userMsg("What is it?", jpegURL, "low") + `]}`,
		},
		{
			name: "temperature 0 with an empty prompt", options: `{"temperature":0,"detail":"high"}`, basePath: "/v1",
			img: pngImage, prompt: "", wantPath: "/v1/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"temperature":0,"messages":[` + userMsg("", pngURL, "high") + `]}`,
		},
		{
			name: "non-zero temperature, top_p 0, detail auto", options: `{"temperature":0.7,"top_p":0,"detail":"auto"}`,
			basePath: "", img: pngImage, prompt: "Caption", wantPath: "/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"temperature":0.7,"top_p":0,"messages":[` + userMsg("Caption", pngURL, "auto") + `]}`,
		},
		{
			name: "prompt with JSON-looking text is sent verbatim", options: `{}`, basePath: "/v1", img: pngImage,
			prompt: `{"type":"text"} "quoted" <tag> & ünïcode`, wantPath: "/v1/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"messages":[` + userMsg(`{"type":"text"} "quoted" <tag> & ünïcode`, pngURL, "") + `]}`,
		},
		{
			name: "response_format as json_schema", options: `{"response_format":{"type":"object","properties":{"label":{"type":"string"}}}}`,
			basePath: "/v1", img: pngImage, prompt: "Label it", wantPath: "/v1/chat/completions",
			wantBody: `{"model":"gpt-4o-mini","stream":false,"messages":[` + userMsg("Label it", pngURL, "") + `],` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"result","strict":false,` +
				`"schema":{"type":"object","properties":{"label":{"type":"string"}}}}}}`,
		},
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-test-123"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeServer(t)
			if strings.Contains(tt.options, "response_format") { // structured output wants a JSON answer
				srv = newFakeServer(t, answer{status: 200, body: strings.Replace(okBody, `"a red square"`, `"{\"label\":\"red square\"}"`, 1)})
			}
			m := testModel(srv.URL+tt.basePath, tt.options)
			m.APIKeyEnv = tt.keyEnv
			p, _ := newTestProvider(t, m, env)

			got, err := p.GenerateText(context.Background(), tt.img, tt.prompt)
			if err != nil {
				t.Fatalf("GenerateText: %v", err)
			}
			want := provider.Completion{Text: "a red square", Usage: provider.Usage{PromptTokens: 12, CompletionTokens: 3}}
			if strings.Contains(tt.options, "response_format") {
				want.Text = `{"label":"red square"}`
			}
			if got != want {
				t.Errorf("completion = %+v, want %+v", got, want)
			}

			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("requests = %d, want 1", len(reqs))
			}
			r := reqs[0]
			if r.method != http.MethodPost || r.path != tt.wantPath {
				t.Errorf("request = %s %s, want POST %s", r.method, r.path, tt.wantPath)
			}
			if r.contentType != "application/json" {
				t.Errorf("Content-Type = %q", r.contentType)
			}
			if tt.wantAuth == "" && r.hasAuth {
				t.Errorf("Authorization = %q, want none", r.auth)
			}
			if tt.wantAuth != "" && r.auth != tt.wantAuth {
				t.Errorf("Authorization = %q, want %q", r.auth, tt.wantAuth)
			}
			var wantBody any
			if err := json.Unmarshal([]byte(tt.wantBody), &wantBody); err != nil {
				t.Fatalf("bad wantBody: %v", err)
			}
			if !reflect.DeepEqual(r.body, wantBody) {
				t.Errorf("body =\n%s\nwant\n%s", r.raw, tt.wantBody)
			}
			if k := duplicateKey(t, r.raw); k != "" {
				t.Errorf("body repeats key %q: %s", k, r.raw)
			}
		})
	}
}

func TestWireFixApply(t *testing.T) {
	zero, half := float32(0), float32(0.5)
	tests := []struct {
		name string
		fix  wireFix
		in   string
		want string
	}{
		{name: "text filled in array content only", fix: wireFix{emptyText: true},
			in:   `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"kept"}]}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"kept"}]}]}`},
		{name: "temperature and top_p set", fix: wireFix{temperature: &zero, topP: &half},
			in:   `{"model":"m","messages":[]}`,
			want: `{"model":"m","messages":[],"temperature":0,"top_p":0.5}`},
		{name: "present values replaced, not duplicated", fix: wireFix{temperature: &half},
			in:   `{"model":"m","temperature":0.5}`,
			want: `{"model":"m","temperature":0.5}`},
		{name: "no fix is identity", fix: wireFix{},
			in:   `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`,
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"text"}]}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.fix.apply([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			var got, want any
			_ = json.Unmarshal(out, &got)
			_ = json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("apply =\n%s\nwant\n%s", out, tt.want)
			}
		})
	}
	if k := duplicateKey(t, []byte(`{"a":{"b":1,"c":[{"b":2}]},"b":{"a":1},"c":"a"}`)); k != "" {
		t.Fatalf("duplicateKey false positive %q", k)
	}
	if k := duplicateKey(t, []byte(`{"a":{"x":1},"b":2,"a":3}`)); k != "a" {
		t.Fatalf("duplicateKey = %q, want a", k)
	}
	if _, err := (wireFix{emptyText: true}).apply([]byte(`not json`)); err == nil {
		t.Fatal("apply accepted invalid JSON")
	}
}

func TestWireFixNeeded(t *testing.T) {
	zero, one := float32(0), float32(1)
	tests := []struct {
		fix  wireFix
		want bool
	}{
		{wireFix{}, false},
		{wireFix{temperature: &one, topP: &one}, false},
		{wireFix{emptyText: true}, true},
		{wireFix{temperature: &zero}, true},
		{wireFix{topP: &zero}, true},
	}
	for i, tt := range tests {
		if got := tt.fix.needed(); got != tt.want {
			t.Errorf("case %d: needed = %v, want %v", i, got, tt.want)
		}
	}
}

func TestBodyMessage(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"error":"model \"llava\" not found"}`, `model "llava" not found`},
		{`{"error":{"message":"nested"}}`, "nested"},
		{`{"message":"top level"}`, "top level"},
		{`{"detail":"Not Found"}`, "Not Found"},
		{`{"detail":[{"msg":"field required"}]}`, `[{"msg":"field required"}]`},
		{"<html>\n  <body>Bad   Gateway</body>\n</html>", "<html> <body>Bad Gateway</body> </html>"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := httpjson.BodyMessage([]byte(tt.body)); got != tt.want {
			t.Errorf("bodyMessage(%q) = %q, want %q", tt.body, got, tt.want)
		}
	}
	if got := httpjson.Truncate(strings.Repeat("é", 400), 501); !strings.HasSuffix(got, "…") || len(got) > 504 {
		t.Errorf("truncate cut badly: %d bytes", len(got))
	}
}

// TestSplicedInto: the image's data URL replaces the placeholder's one
// occurrence, as a JSON string, and nothing else; a body without it, or
// with it twice, is refused rather than sent.
func TestSplicedInto(t *testing.T) {
	img := &spliced{placeholder: "pgimageai-image-ABC", format: magic.PNG, data: []byte{0x89, 'P', 'N', 'G'}}
	tests := []struct {
		name, body, want, wantErr string
	}{
		{"the image in place", `{"p":"pgimageai-image-AB","u":"pgimageai-image-ABC"}`,
			`{"p":"pgimageai-image-AB","u":"data:image/png;base64,iVBORw=="}`, ""},
		{"only the quoted string counts", `{"p":"xpgimageai-image-ABCx","u":"pgimageai-image-ABC"}`,
			`{"p":"xpgimageai-image-ABCx","u":"data:image/png;base64,iVBORw=="}`, ""},
		{"no placeholder", `{"u":"x"}`, "", "not in the body exactly once"},
		{"twice", `{"a":"pgimageai-image-ABC","b":"pgimageai-image-ABC"}`, "", "not in the body exactly once"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := img.into([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.want {
				t.Fatalf("into = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
}

// TestPlaceholderIsSecret: each provider has its own random placeholder, so
// a prompt (which a source row may fill) cannot name it.
func TestPlaceholderIsSecret(t *testing.T) {
	m := provider.Model{Name: "m", Provider: "openai", Model: "gpt-test", BaseURL: "http://127.0.0.1:1/v1"}
	a, err := New(m, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(m, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if a.placeholder == b.placeholder || len(a.placeholder) < len("pgimageai-image-")+20 {
		t.Errorf("placeholders %q and %q: want random, long and different", a.placeholder, b.placeholder)
	}
}
