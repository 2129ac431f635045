package integration_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeBatchAI is an OpenAI-compatible server with the Batch API beside the
// synchronous /chat/completions of fakeAI (which it embeds, and which
// records only synchronous calls). It checks the request shapes that
// OpenAI documents:
//
//   - POST /v1/files, multipart/form-data with purpose=batch and a JSONL file
//     (https://platform.openai.com/docs/api-reference/files/create), each
//     line {"custom_id","method":"POST","url":"/v1/chat/completions","body"}
//     with a unique custom_id (https://platform.openai.com/docs/api-reference/batch/request-input);
//   - POST /v1/batches {"input_file_id","endpoint":"/v1/chat/completions",
//     "completion_window":"24h"} (https://platform.openai.com/docs/api-reference/batch/create);
//   - GET /v1/batches and /v1/batches/{id}, GET /v1/files/{id}/content
//     (/batch/list, /batch/retrieve, /files/retrieve-contents).
//
// Its answers follow the documented output lines
// (https://platform.openai.com/docs/api-reference/batch/request-output):
// {"id","custom_id","response":{"status_code","request_id","body"},"error"};
// a failed row is a 400 in the error file; a request an expired batch did
// not run is an error line with code batch_expired.
type fakeBatchAI struct {
	*fakeAI
	t       testing.TB
	mu      sync.Mutex
	inputs  map[string][]batchInput // by file id
	content map[string]string       // output and error files by id
	batches []*fakeBatch
	uploads int
	creates int
	polls   int
	// release lets batches finish; until then they stay in_progress.
	release bool
	// holdCreate: a create makes the batch but never answers.
	holdCreate bool
	// refuseUploads answers every upload with a 403, as OpenAI does for a
	// key without access to the Files API.
	refuseUploads bool
	// failIDs are rows whose line fails with a 400.
	failIDs map[int]bool
	// expire, when set, gives for batch n (from 1) how many of its lines
	// are answered before it expires; -1: it completes.
	expire func(n int) int
	// pad lengthens each answer of a batch by that many bytes.
	pad int
	// deleted and cancelled record DELETE /v1/files/{id} and
	// POST /v1/batches/{id}/cancel.
	deleted, cancelled []string
	// released lets batch n (from 1) finish on its own, before release.
	released map[int]bool
	// refuseCreate answers create request n (from 1, refused ones
	// included) with a 400, as OpenAI refuses a batch for good.
	refuseCreate map[int]bool
	createAsks   int
	// downloads counts GET /v1/files/{id}/content by file id.
	downloads map[string]int
}

type batchInput struct {
	customID string
	id       int // the row's id, from the key in custom_id
	dataURL  string
}

type fakeBatch struct {
	obj   map[string]any
	lines []batchInput
	polls int
}

func newFakeBatchAI(tb testing.TB) *fakeBatchAI {
	tb.Helper()
	f := &fakeBatchAI{fakeAI: &fakeAI{}, t: tb, inputs: map[string][]batchInput{}, content: map[string]string{}, failIDs: map[int]bool{},
		released: map[int]bool{}, refuseCreate: map[int]bool{}, downloads: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", f.fakeAI.serve)
	mux.HandleFunc("/v1/", f.serveBatch)
	f.fakeAI.Server = httptest.NewServer(mux)
	tb.Cleanup(f.fakeAI.Close)
	return f
}

func (f *fakeBatchAI) serveBatch(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	hold := f.holdCreate && r.Method == "POST" && r.URL.Path == "/v1/batches"
	f.mu.Unlock()
	if hold {
		// Create the batch, but never answer: the client is killed waiting.
		f.mu.Lock()
		f.serveLocked(httptest.NewRecorder(), r)
		f.mu.Unlock()
		<-r.Context().Done()
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.serveLocked(w, r)
}

func (f *fakeBatchAI) serveLocked(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	fail := func(format string, args ...any) {
		f.t.Errorf("batch API: "+format, args...)
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error"}}`, fmt.Sprintf(format, args...))
	}
	switch p := r.URL.Path; {
	case r.Method == "POST" && p == "/v1/files" && f.refuseUploads:
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"error":{"message":"You are not allowed to upload files.","type":"invalid_request_error"}}`)
	case r.Method == "POST" && p == "/v1/files":
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/form-data") {
			fail("upload with Content-Type %q", r.Header.Get("Content-Type"))
			return
		}
		mr, err := r.MultipartReader()
		if err != nil {
			fail("upload: %v", err)
			return
		}
		var purpose string
		var lines []batchInput
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				fail("upload: %v", err)
				return
			}
			switch part.FormName() {
			case "purpose":
				b, _ := io.ReadAll(part)
				purpose = string(b)
			case "file":
				if lines, err = f.parseInput(part); err != nil {
					fail("input file: %v", err)
					return
				}
			}
		}
		if purpose != "batch" || len(lines) == 0 {
			fail("upload: purpose %q, %d lines", purpose, len(lines))
			return
		}
		f.uploads++
		id := fmt.Sprintf("file-in-%d", f.uploads)
		f.inputs[id] = lines
		fmt.Fprintf(w, `{"id":%q,"object":"file","bytes":0,"created_at":1,"filename":"in.jsonl","purpose":"batch"}`, id)
	case r.Method == "POST" && p == "/v1/batches" && f.refuseCreateNext():
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"error":{"message":"Enqueued token limit reached for gpt-test in organization org-x.","type":"invalid_request_error","code":"token_limit_exceeded"}}`)
	case r.Method == "POST" && p == "/v1/batches":
		var req struct {
			InputFileID      string `json:"input_file_id"`
			Endpoint         string `json:"endpoint"`
			CompletionWindow string `json:"completion_window"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || f.inputs[req.InputFileID] == nil ||
			req.Endpoint != "/v1/chat/completions" || req.CompletionWindow != "24h" {
			fail("create batch: %+v (%v)", req, err)
			return
		}
		f.creates++
		b := &fakeBatch{lines: f.inputs[req.InputFileID], obj: map[string]any{"id": fmt.Sprintf("batch_%d", f.creates), "object": "batch",
			"endpoint": req.Endpoint, "input_file_id": req.InputFileID, "completion_window": "24h", "status": "validating", "created_at": 1,
			"request_counts": map[string]int{"total": 0, "completed": 0, "failed": 0}}}
		f.batches = append(f.batches, b)
		json.NewEncoder(w).Encode(b.obj)
	case r.Method == "GET" && p == "/v1/batches":
		data := []any{}
		for i := len(f.batches) - 1; i >= 0; i-- {
			data = append(data, f.batches[i].obj)
		}
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "has_more": false})
	case r.Method == "DELETE" && strings.HasPrefix(p, "/v1/files/"):
		// https://platform.openai.com/docs/api-reference/files/delete
		id := strings.TrimPrefix(p, "/v1/files/")
		f.deleted = append(f.deleted, id)
		delete(f.content, id) // input files stay in f.inputs, for the tests to inspect
		json.NewEncoder(w).Encode(map[string]any{"id": id, "object": "file", "deleted": true})
	case r.Method == "POST" && strings.HasPrefix(p, "/v1/batches/") && strings.HasSuffix(p, "/cancel"):
		// https://platform.openai.com/docs/api-reference/batch/cancel
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/batches/"), "/cancel")
		f.cancelled = append(f.cancelled, id)
		for _, b := range f.batches {
			if b.obj["id"] == id {
				b.obj["status"] = "cancelling"
				json.NewEncoder(w).Encode(b.obj)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"No such batch","type":"invalid_request_error"}}`)
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/batches/"):
		for n, b := range f.batches {
			if b.obj["id"] == strings.TrimPrefix(p, "/v1/batches/") {
				f.polls++
				b.polls++
				f.advance(n+1, b)
				json.NewEncoder(w).Encode(b.obj)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"message":"No such batch","type":"invalid_request_error"}}`)
	case r.Method == "GET" && strings.HasPrefix(p, "/v1/files/") && strings.HasSuffix(p, "/content"):
		id := strings.TrimSuffix(strings.TrimPrefix(p, "/v1/files/"), "/content")
		f.downloads[id]++
		c, ok := f.content[id]
		if !ok {
			fail("no file %s", p)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		io.WriteString(w, c)
	default:
		fail("unexpected %s %s", r.Method, p)
	}
}

// parseInput checks every line of an input file and returns them.
func (f *fakeBatchAI) parseInput(r io.Reader) ([]batchInput, error) {
	var out []batchInput
	seen := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l struct {
			CustomID string         `json:"custom_id"`
			Method   string         `json:"method"`
			URL      string         `json:"url"`
			Body     map[string]any `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, err
		}
		if l.CustomID == "" || seen[l.CustomID] || l.Method != "POST" || l.URL != "/v1/chat/completions" {
			return nil, fmt.Errorf("line %d: custom_id %q (seen %v), method %q, url %q", len(out)+1, l.CustomID, seen[l.CustomID], l.Method, l.URL)
		}
		seen[l.CustomID] = true
		// The body is the synchronous request: the model, one user message
		// of a text part and an image_url part with the data URL.
		var req aiRequest
		b, _ := json.Marshal(l.Body)
		_ = json.Unmarshal(b, &req.Body)
		msgs, _ := req.Body["messages"].([]any)
		if len(msgs) != 1 || req.Body["model"] != "gpt-test" {
			return nil, fmt.Errorf("line %d: body %s", len(out)+1, first(string(b), 300))
		}
		parts, _ := msgs[0].(map[string]any)["content"].([]any)
		var in batchInput
		in.customID = l.CustomID
		for _, p := range parts {
			part, _ := p.(map[string]any)
			switch part["type"] {
			case "text":
				if part["text"] != "Describe the image" {
					return nil, fmt.Errorf("line %d: text part %v", len(out)+1, part)
				}
			case "image_url":
				iu, _ := part["image_url"].(map[string]any)
				in.dataURL, _ = iu["url"].(string)
			}
		}
		if len(parts) != 2 || !hasPrefix(in.dataURL, "image/png") {
			return nil, fmt.Errorf("line %d: content %s", len(out)+1, first(string(b), 300))
		}
		_, key, _ := strings.Cut(l.CustomID, "/")
		var k struct{ ID int }
		if err := json.Unmarshal([]byte(key), &k); err != nil || k.ID == 0 {
			return nil, fmt.Errorf("line %d: no row key in custom_id %q", len(out)+1, l.CustomID)
		}
		in.id = k.ID
		out = append(out, in)
	}
	return out, sc.Err()
}

func first(s string, n int) string { return s[:min(len(s), n)] }

// advance moves batch n along: validating, in_progress until released,
// then completed (or expired) with its output and error files.
func (f *fakeBatchAI) advance(n int, b *fakeBatch) {
	switch b.obj["status"] {
	case "validating":
		b.obj["status"] = "in_progress"
		return
	case "cancelling": // https://platform.openai.com/docs/api-reference/batch/object
		b.obj["status"] = "cancelled"
		return
	case "in_progress":
		if !f.release && !f.released[n] {
			return
		}
	default:
		return
	}
	answered := len(b.lines)
	status := "completed"
	if f.expire != nil {
		if a := f.expire(n); a >= 0 {
			answered, status = min(a, answered), "expired"
		}
	}
	var out, errs strings.Builder
	completed, failed := 0, 0
	for i, in := range b.lines {
		switch {
		case i >= answered:
			fmt.Fprintf(&errs, `{"id":"batch_req_%d_%d","custom_id":%q,"response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}`+"\n", n, i, in.customID)
		case f.failIDs[in.id]:
			failed++
			fmt.Fprintf(&errs, `{"id":"batch_req_%d_%d","custom_id":%q,"response":{"status_code":400,"request_id":"req_%d","body":{"error":{"message":"Invalid image in row %d.","type":"invalid_request_error","param":null,"code":null}}},"error":null}`+"\n", n, i, in.customID, i, in.id)
		default:
			completed++
			body, _ := json.Marshal(map[string]any{"id": "chatcmpl-b", "object": "chat.completion", "created": 1, "model": "gpt-test",
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": captionOf(in.dataURL) + strings.Repeat("x", f.pad)}}},
				"usage":   map[string]any{"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}})
			fmt.Fprintf(&out, `{"id":"batch_req_%d_%d","custom_id":%q,"response":{"status_code":200,"request_id":"req_%d","body":%s},"error":null}`+"\n", n, i, in.customID, i, body)
		}
	}
	outID, errID := fmt.Sprintf("file-out-%d", n), fmt.Sprintf("file-err-%d", n)
	f.content[outID], f.content[errID] = out.String(), errs.String()
	b.obj["status"], b.obj["output_file_id"], b.obj["error_file_id"] = status, outID, errID
	b.obj["request_counts"] = map[string]int{"total": len(b.lines), "completed": completed, "failed": failed}
}

// counts returns the uploads, creates and polls so far.
func (f *fakeBatchAI) counts() (uploads, creates, polls int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.uploads, f.creates, f.polls
}

// setHoldCreate sets holdCreate.
func (f *fakeBatchAI) setHoldCreate(hold bool) {
	f.mu.Lock()
	f.holdCreate = hold
	f.mu.Unlock()
}

// refuseCreateNext counts a create request and reports whether to refuse
// it. f.mu is held.
func (f *fakeBatchAI) refuseCreateNext() bool {
	f.createAsks++
	return f.refuseCreate[f.createAsks]
}

// setReleased lets batch n finish.
func (f *fakeBatchAI) setReleased(n int) {
	f.mu.Lock()
	f.released[n] = true
	f.mu.Unlock()
}

// statusOf returns the status of batch n (from 1); "" before it exists.
func (f *fakeBatchAI) statusOf(n int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > len(f.batches) {
		return ""
	}
	s, _ := f.batches[n-1].obj["status"].(string)
	return s
}

// setRelease lets the batches finish.
func (f *fakeBatchAI) setRelease() {
	f.mu.Lock()
	f.release = true
	f.mu.Unlock()
}

// linesOf returns the rows of every uploaded input file, in upload order.
func (f *fakeBatchAI) linesOf() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out [][]int
	for i := 1; i <= f.uploads; i++ {
		var ids []int
		for _, in := range f.inputs[fmt.Sprintf("file-in-%d", i)] {
			ids = append(ids, in.id)
		}
		out = append(out, ids)
	}
	return out
}
