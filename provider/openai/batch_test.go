package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/provider"
)

// TestBatchLineIsTheSyncRequest: a batch line's body is, JSON for JSON, the
// request GenerateText sends for the same image and prompt (OpenAI's batch
// input line: {"custom_id","method":"POST","url":"/v1/chat/completions",
// "body"}, https://platform.openai.com/docs/api-reference/batch/request-input).
func TestBatchLineIsTheSyncRequest(t *testing.T) {
	for _, tc := range []struct{ name, options, prompt string }{
		{"minimal", `{"batch_api":true}`, "Describe"},
		{"empty prompt, temperature 0, detail, system prompt, max_tokens",
			`{"batch_api":true,"temperature":0,"detail":"low","system_prompt":"Be terse.","max_tokens":50}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFakeServer(t, ok200)
			p, _ := newTestProvider(t, testModel(srv.URL+"/v1", tc.options), nil)
			if !p.BatchEnabled() {
				t.Fatal("batch_api: true but BatchEnabled is false")
			}
			if _, err := p.GenerateText(context.Background(), pngImage, tc.prompt); err != nil {
				t.Fatal(err)
			}
			line, err := p.BatchLine("id-1", pngImage, tc.prompt)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				CustomID string `json:"custom_id"`
				Method   string `json:"method"`
				URL      string `json:"url"`
				Body     any    `json:"body"`
			}
			if err := json.Unmarshal(line, &got); err != nil {
				t.Fatal(err)
			}
			if got.CustomID != "id-1" || got.Method != "POST" || got.URL != "/v1/chat/completions" {
				t.Errorf("line envelope = %q %q %q", got.CustomID, got.Method, got.URL)
			}
			if sync := srv.requests()[0].body; !reflect.DeepEqual(got.Body, sync) {
				t.Errorf("batch body differs from the synchronous request:\n batch %v\n sync  %v", got.Body, sync)
			}
		})
	}
}

func TestBatchOptions(t *testing.T) {
	for _, tc := range []struct{ options, wantErr string }{
		{`{"batch_api":true,"batch_max_requests":50001}`, "batch_max_requests"},
		{`{"batch_api":true,"batch_max_bytes":209715201}`, "batch_max_bytes"},
		{`{"batch_api":true,"batch_poll_interval":"-1s"}`, "batch_poll_interval"},
		{`{"batch_api":true,"batch_max_requests":10,"batch_poll_interval":"2s"}`, ""},
	} {
		_, err := New(testModel("", tc.options), mapEnv(nil))
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: err = %v, want %q", tc.options, err, tc.wantErr)
		}
	}
	p, _ := newTestProvider(t, testModel("", `{}`), nil)
	if p.BatchEnabled() {
		t.Error("BatchEnabled without batch_api")
	}
}

// batchServer is an OpenAI Batch API that checks the documented request
// shapes (https://platform.openai.com/docs/api-reference/files/create,
// /batch/create, /batch/retrieve, /batch/list, /files/retrieve-contents).
type batchServer struct {
	*httptest.Server
	t       *testing.T
	mu      sync.Mutex
	files   map[string]string
	batches []map[string]any
}

func newBatchServer(t *testing.T) *batchServer {
	s := &batchServer{t: t, files: map[string]string{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *batchServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := r.Header.Get("Authorization"); got != "Bearer sk-batch" {
		s.t.Errorf("%s %s: Authorization %q", r.Method, r.URL.Path, got)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "POST" && r.URL.Path == "/v1/files":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			s.t.Errorf("upload: %v", err)
		}
		f, fh, err := r.FormFile("file")
		if err != nil || r.FormValue("purpose") != "batch" || !strings.HasSuffix(fh.Filename, ".jsonl") {
			s.t.Errorf("upload: file %v, purpose %q", err, r.FormValue("purpose"))
			w.WriteHeader(400)
			return
		}
		b, _ := io.ReadAll(f)
		id := fmt.Sprintf("file-%d", len(s.files)+1)
		s.files[id] = string(b)
		fmt.Fprintf(w, `{"id":%q,"object":"file","bytes":%d,"filename":%q,"purpose":"batch"}`, id, len(b), fh.Filename)
	case r.Method == "POST" && r.URL.Path == "/v1/batches":
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		if _, ok := s.files[fmt.Sprint(req["input_file_id"])]; !ok || req["endpoint"] != "/v1/chat/completions" || req["completion_window"] != "24h" {
			s.t.Errorf("create batch: %v", req)
		}
		b := map[string]any{"id": fmt.Sprintf("batch_%d", len(s.batches)+1), "object": "batch", "endpoint": "/v1/chat/completions",
			"input_file_id": req["input_file_id"], "completion_window": "24h", "status": "validating", "metadata": req["metadata"],
			"request_counts": map[string]int{"total": 0, "completed": 0, "failed": 0}}
		s.batches = append(s.batches, b)
		json.NewEncoder(w).Encode(b)
	case r.Method == "GET" && r.URL.Path == "/v1/batches":
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": s.batches, "has_more": false})
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/batches/"):
		for _, b := range s.batches {
			if b["id"] == strings.TrimPrefix(r.URL.Path, "/v1/batches/") {
				json.NewEncoder(w).Encode(b)
				return
			}
		}
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"message":"No batch found","type":"invalid_request_error"}}`)
	case r.Method == "GET" && strings.HasPrefix(r.URL.Path, "/v1/files/") && strings.HasSuffix(r.URL.Path, "/content"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/files/"), "/content")
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, s.files[id])
	case r.Method == "DELETE" && strings.HasPrefix(r.URL.Path, "/v1/files/"):
		// https://platform.openai.com/docs/api-reference/files/delete
		id := strings.TrimPrefix(r.URL.Path, "/v1/files/")
		if _, ok := s.files[id]; !ok {
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"message":"No such File object","type":"invalid_request_error"}}`)
			return
		}
		delete(s.files, id)
		fmt.Fprintf(w, `{"id":%q,"object":"file","deleted":true}`, id)
	case r.Method == "POST" && strings.HasPrefix(r.URL.Path, "/v1/batches/") && strings.HasSuffix(r.URL.Path, "/cancel"):
		// https://platform.openai.com/docs/api-reference/batch/cancel: a
		// batch that is not running is a 400.
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/batches/"), "/cancel")
		for _, b := range s.batches {
			if b["id"] == id {
				if b["status"] == "cancelling" || b["status"] == "completed" {
					w.WriteHeader(400)
					io.WriteString(w, `{"error":{"message":"Cannot cancel a batch with status completed.","type":"invalid_request_error"}}`)
					return
				}
				b["status"] = "cancelling"
				json.NewEncoder(w).Encode(b)
				return
			}
		}
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"message":"No batch found","type":"invalid_request_error"}}`)
	default:
		s.t.Errorf("unexpected %s %s", r.Method, r.URL.Path)
		w.WriteHeader(404)
	}
}

// TestBatchRoundTrip: upload, create, find, retrieve, and the answers of an
// output and an error file, judged like synchronous answers.
func TestBatchRoundTrip(t *testing.T) {
	ctx := context.Background()
	srv := newBatchServer(t)
	m := testModel(srv.URL+"/v1", `{"batch_api":true}`)
	m.APIKeyEnv = "BATCH_KEY"
	p, _ := newTestProvider(t, m, map[string]string{"BATCH_KEY": "sk-batch"})
	var lines []string
	for i := range 3 {
		l, err := p.BatchLine(fmt.Sprintf("row-%d", i), pngImage, "Describe")
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(l))
	}
	input := strings.Join(lines, "\n") + "\n"
	fileID, err := p.UploadBatch(ctx, "in.jsonl", strings.NewReader(input))
	if err != nil || srv.files[fileID] != input {
		t.Fatalf("upload: id %q, err %v; stored %q", fileID, err, srv.files[fileID])
	}
	if _, found, err := p.FindBatch(ctx, fileID); err != nil || found {
		t.Fatalf("FindBatch before create: found %v, err %v", found, err)
	}
	job, err := p.CreateBatch(ctx, fileID, map[string]string{"pgimageai_rule": "r"})
	if err != nil || job.ID != "batch_1" || job.Status != "validating" || job.Final() {
		t.Fatalf("create: %+v, %v", job, err)
	}
	if found, ok, err := p.FindBatch(ctx, fileID); err != nil || !ok || found.ID != job.ID {
		t.Fatalf("FindBatch after create: %+v %v %v", found, ok, err)
	}
	okLine := func(id, text string) string {
		return fmt.Sprintf(`{"id":"batch_req_1","custom_id":%q,"response":{"status_code":200,"request_id":"r","body":{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}},"error":null}`, id, text)
	}
	srv.mu.Lock()
	srv.files["file-out"] = okLine("row-0", "a red square") + "\n" + okLine("row-empty", "") + "\n" + `{"custom_id":"row-garbage","response":{"status_code":200,"body":"nope"},"error":null}` + "\n"
	srv.files["file-err"] = `{"id":"x","custom_id":"row-1","response":{"status_code":400,"request_id":"r","body":{"error":{"message":"Invalid image.","type":"invalid_request_error"}}},"error":null}` + "\n" +
		`{"id":"y","custom_id":"row-2","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}` + "\n" +
		`{"id":"z","custom_id":"row-3","response":{"status_code":500,"body":{"error":{"message":"oops"}}},"error":null}` + "\n" +
		`{"id":"w","custom_id":"row-4","response":null,"error":{"code":"server_error","message":"The batch failed to run this request."}}` + "\n"
	srv.batches[0]["status"], srv.batches[0]["output_file_id"], srv.batches[0]["error_file_id"] = "expired", "file-out", "file-err"
	srv.mu.Unlock()
	job, err = p.RetrieveBatch(ctx, job.ID)
	if err != nil || !job.Final() || job.OutputFileID != "file-out" || job.ErrorFileID != "file-err" {
		t.Fatalf("retrieve: %+v, %v", job, err)
	}
	got := map[string]provider.BatchAnswer{}
	for _, f := range []string{job.OutputFileID, job.ErrorFileID} {
		if err := p.BatchAnswers(ctx, f, 10, func(a provider.BatchAnswer) error { got[a.CustomID] = a; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	kindOf := func(err error) provider.Kind {
		var pe *provider.Error
		if !errors.As(err, &pe) {
			return 0
		}
		return pe.Kind
	}
	if a := got["row-0"]; a.Err != nil || a.Completion.Text != "a red square" || a.Completion.Usage.PromptTokens != 7 {
		t.Errorf("row-0: %+v", a)
	}
	if a := got["row-empty"]; kindOf(a.Err) != provider.BadResponse {
		t.Errorf("an empty answer: %+v, want bad_response like a synchronous one", a)
	}
	if a := got["row-garbage"]; kindOf(a.Err) != provider.BadResponse {
		t.Errorf("a body that is no completion: %+v, want bad_response", a)
	}
	if a := got["row-1"]; kindOf(a.Err) != provider.Permanent || !strings.Contains(a.Err.Error(), "HTTP 400: Invalid image.") {
		t.Errorf("row-1: %+v, want a permanent HTTP 400", a)
	}
	if a := got["row-2"]; !a.Unanswered || a.Err != nil {
		t.Errorf("batch_expired: %+v, want unanswered", a)
	}
	if a := got["row-4"]; !a.Unanswered || a.Err != nil {
		t.Errorf("an error code of the batch's own: %+v, want unanswered (not a permanent failure)", a)
	}
	if a := got["row-3"]; !a.Unanswered {
		t.Errorf("a 500 (retried by a synchronous call): %+v, want unanswered", a)
	}
	// Bounds: more lines than requests fail the read; a line over the
	// bound of a synchronous answer is skipped unheld (its row gets the
	// synchronous call) and the lines after it are read.
	if err := p.BatchAnswers(ctx, "file-out", 2, func(provider.BatchAnswer) error { return nil }); kindOf(err) != provider.BadResponse {
		t.Errorf("3 lines read with a bound of 2: %v", err)
	}
	srv.mu.Lock()
	srv.files["file-big"] = okLine("row-big", strings.Repeat("x", provider.MaxChatAnswerBytes+maxLineEnvelope)) + "\n" +
		okLine("row-after", "a caption") + "\n"
	srv.mu.Unlock()
	var ids []string
	if err := p.BatchAnswers(ctx, "file-big", 2, func(a provider.BatchAnswer) error { ids = append(ids, a.CustomID); return nil }); err != nil || len(ids) != 1 || ids[0] != "row-after" {
		t.Errorf("a line over the bound, then a good one: err %v, answers %v; want only row-after", err, ids)
	}
	if err := p.BatchAnswers(ctx, "file-big", 1, func(provider.BatchAnswer) error { return nil }); kindOf(err) != provider.BadResponse {
		t.Errorf("a skipped line counts against the bound of lines: %v", err)
	}
}

// batchOKLine is an output-file line answering customID with text (OpenAI's
// batch output line, https://platform.openai.com/docs/api-reference/batch/request-output).
func batchOKLine(customID, text string) string {
	return fmt.Sprintf(`{"id":"batch_req_1","custom_id":%q,"response":{"status_code":200,"request_id":"r","body":{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":2,"total_tokens":9}}},"error":null}`, customID, text)
}

// fileServer serves GET /v1/files/{id}/content with serve, which gets the
// request's number (from 1).
func fileServer(t *testing.T, serve func(n int, w http.ResponseWriter, r *http.Request)) (*httptest.Server, *int) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/content") {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		mu.Lock()
		n++
		i := n
		mu.Unlock()
		serve(i, w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestBatchAnswersRetryAfterTimeout: an attempt whose headers do not come
// within the timeout is retried, and the retry reads the file; the first
// attempt's end does not cancel the next one's request.
func TestBatchAnswersRetryAfterTimeout(t *testing.T) {
	srv, n := fileServer(t, func(i int, w http.ResponseWriter, r *http.Request) {
		if i == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		io.WriteString(w, batchOKLine("row-0", "a red square")+"\n")
	})
	p, _ := newTestProvider(t, testModel(srv.URL+"/v1", `{"batch_api":true,"timeout":"200ms","max_retries":2}`), nil)
	var got []string
	err := p.BatchAnswers(context.Background(), "file-out", 10, func(a provider.BatchAnswer) error {
		got = append(got, a.CustomID+"="+a.Completion.Text)
		return nil
	})
	if err != nil || *n != 2 || len(got) != 1 || got[0] != "row-0=a red square" {
		t.Fatalf("err %v after %d requests; answers %q; want the second attempt's answer", err, *n, got)
	}
}

// TestBatchAnswersBounded: what a provider's file can make the bridge read
// is bounded by the lines asked for: a line over the bound is skipped, one
// over twice the bound ends the read, blank lines count, and a file that
// stalls ends the read at the model's timeout.
func TestBatchAnswersBounded(t *testing.T) {
	const limit = provider.MaxChatAnswerBytes + maxLineEnvelope
	ok := batchOKLine("row-0", "a red square") + "\n"
	tests := []struct {
		name     string
		body     func(w http.ResponseWriter)
		maxLines int
		want     []string // answers' custom_ids
		wantErr  string
		kind     provider.Kind
	}{
		{"a long line skipped", func(w http.ResponseWriter) {
			io.WriteString(w, `{"custom_id":"row-long","x":"`+strings.Repeat("a", limit)+"\"}\n"+ok)
		}, 2, []string{"row-0"}, "", 0},
		{"a far too long line ends the read", func(w http.ResponseWriter) {
			io.WriteString(w, strings.Repeat("a", 3*limit)+"\n"+ok)
		}, 2, nil, "far too long", provider.BadResponse},
		{"blank lines count", func(w http.ResponseWriter) {
			io.WriteString(w, strings.Repeat("\n", 3)+ok)
		}, 1, nil, "more than 1 blank lines", provider.BadResponse},
		{"a stalled file ends the read", func(w http.ResponseWriter) {
			io.WriteString(w, ok)
			w.(http.Flusher).Flush()
			time.Sleep(2 * time.Second)
		}, 5, []string{"row-0"}, "no line within the timeout", provider.Transient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, _ := fileServer(t, func(_ int, w http.ResponseWriter, _ *http.Request) { tt.body(w) })
			// The stalled file's case waits out the timeout; the others must not meet it
			// while megabytes are written on a loaded machine.
			timeout := "10s"
			if tt.kind == provider.Transient {
				timeout = "300ms"
			}
			p, _ := newTestProvider(t, testModel(srv.URL+"/v1", `{"batch_api":true,"timeout":"`+timeout+`","max_retries":0}`), nil)
			var got []string
			err := p.BatchAnswers(context.Background(), "file-out", tt.maxLines, func(a provider.BatchAnswer) error {
				got = append(got, a.CustomID)
				return nil
			})
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("answers %q, want %q", got, tt.want)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			var pe *provider.Error
			if !errors.As(err, &pe) || pe.Kind != tt.kind || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want a %v error naming %q", err, tt.kind, tt.wantErr)
			}
		})
	}
}

// TestBatchCleanup: a file is deleted (DELETE /v1/files/{id}) and a running
// batch cancelled (POST /v1/batches/{id}/cancel); a file already gone (404)
// and a batch no longer running (400) are not errors.
func TestBatchCleanup(t *testing.T) {
	ctx := context.Background()
	srv := newBatchServer(t)
	m := testModel(srv.URL+"/v1", `{"batch_api":true}`)
	m.APIKeyEnv = "BATCH_KEY"
	p, _ := newTestProvider(t, m, map[string]string{"BATCH_KEY": "sk-batch"})
	id, err := p.UploadBatch(ctx, "in.jsonl", strings.NewReader("{}\n"))
	if err != nil {
		t.Fatal(err)
	}
	job, err := p.CreateBatch(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.CancelBatch(ctx, job.ID); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		if err := p.DeleteBatchFile(ctx, id); err != nil {
			t.Fatalf("delete: %v", err)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if _, ok := srv.files[id]; ok || srv.batches[0]["status"] != "cancelling" {
		t.Fatalf("file kept %v, batch %v: want the file deleted and the batch cancelling", ok, srv.batches[0]["status"])
	}
}
