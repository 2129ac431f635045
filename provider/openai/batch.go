package openai

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/pgimageai/pgimageai/magic"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/httpjson"
	"github.com/pgimageai/pgimageai/provider/pace"
)

// This file is the openai provider's provider.BatchAPI: a backfill of a
// model with batch_api: true runs through OpenAI's Batch API, at half the
// price of the synchronous API. The shapes follow OpenAI's documentation:
//
//   - the input file, one request per line: {"custom_id", "method": "POST",
//     "url": "/v1/chat/completions", "body": <the chat request>}
//     (https://platform.openai.com/docs/api-reference/batch/request-input);
//     uploaded by POST /v1/files as multipart/form-data with purpose=batch
//     (https://platform.openai.com/docs/api-reference/files/create): at most
//     50,000 requests and 200 MB per file;
//   - POST /v1/batches {"input_file_id", "endpoint": "/v1/chat/completions",
//     "completion_window": "24h", "metadata"} and GET /v1/batches/{id}
//     (https://platform.openai.com/docs/api-reference/batch/create and
//     /retrieve; statuses validating, failed, in_progress, finalizing,
//     completed, expired, cancelling, cancelled — openai-python
//     src/openai/types/batch.py);
//   - the output and error files, GET /v1/files/{id}/content, one line per
//     request: {"id", "custom_id", "response": {"status_code", "request_id",
//     "body"}, "error": {"code", "message"}}
//     (https://platform.openai.com/docs/api-reference/batch/request-output,
//     openai-python src/openai/types/batch_request_output.py). Requests not
//     run before a batch expired are in the error file with code
//     batch_expired (https://platform.openai.com/docs/guides/batch).
//
// go-openai's CreateBatch, RetrieveBatch, ListBatch and GetFileContent make
// the JSON calls; the upload is made here, because go-openai's CreateFile
// builds the whole multipart body in memory, and an input file may be 200 MB.

// Defaults and bounds of the batch options.
const (
	MaxBatchRequests         = 50000     // OpenAI's limit of requests per input file
	MaxBatchBytes            = 200 << 20 // OpenAI's limit of bytes per input file (200 MB)
	DefaultBatchBytes        = 190 << 20 // some room below it
	DefaultBatchPollInterval = time.Minute
	// maxPollInterval is the longest wait between two polls of a batch.
	maxPollInterval = 10 * time.Minute
	// maxCustomID bounds a custom_id we make (a longer row key is not put
	// in a batch) and so the envelope of an answer line.
	maxCustomID = 4 << 10
	// maxBatchObject bounds the JSON of a batch object or a file object.
	maxBatchObject = 1 << 20
	// maxLineEnvelope is what an answer line holds beside the answer body.
	maxLineEnvelope = 64<<10 + maxCustomID
)

// BatchOptions are the keys of models.options for the Batch API.
type BatchOptions struct {
	// BatchAPI sends the model's backfills through the Batch API.
	BatchAPI bool `json:"batch_api,omitempty"`
	// BatchMaxRequests and BatchMaxBytes bound one batch's input file
	// (defaults: 50,000 requests, 190 MiB); a backfill with more is split
	// into several batches.
	BatchMaxRequests int   `json:"batch_max_requests,omitempty"`
	BatchMaxBytes    int64 `json:"batch_max_bytes,omitempty"`
	// BatchPollInterval is the first wait between polls of a running batch
	// (default 1m); it doubles up to 8 times that, at most 10 minutes.
	BatchPollInterval provider.Duration `json:"batch_poll_interval,omitempty"`
}

// Validate reports the first invalid batch option.
func (o BatchOptions) Validate() error {
	switch {
	case o.BatchMaxRequests < 0 || o.BatchMaxRequests > MaxBatchRequests:
		return fmt.Errorf("option batch_max_requests: must be between 1 and %d, got %d", MaxBatchRequests, o.BatchMaxRequests)
	case o.BatchMaxBytes < 0 || o.BatchMaxBytes > MaxBatchBytes:
		return fmt.Errorf("option batch_max_bytes: must be between 1 and %d, got %d", MaxBatchBytes, o.BatchMaxBytes)
	case o.BatchPollInterval < 0:
		return fmt.Errorf("option batch_poll_interval: must be positive, got %s", time.Duration(o.BatchPollInterval))
	}
	return nil
}

// batchClient is the HTTP side of the Batch API of one model: its own
// go-openai client, whose answers are bounded for batch and file objects,
// and the key and base URL for the streamed upload.
type batchClient struct {
	base   string
	key    string
	http   *http.Client
	json   *goopenai.Client // batch and file objects: bounded to maxBatchObject
	files  *goopenai.Client // file contents: bounded line by line in BatchAnswers
	limits provider.BatchLimits
}

func newBatchClient(cfg Config, base, key string) *batchClient {
	hc := provider.NewHTTPClient(http.DefaultTransport.(*http.Transport).Clone())
	mk := func(limit int64) *goopenai.Client {
		cc := goopenai.DefaultConfig(key)
		cc.BaseURL = base
		cc.HTTPClient = &doer{client: hc, maxAnswer: limit}
		return goopenai.NewClientWithConfig(cc)
	}
	l := provider.BatchLimits{MaxRequests: cfg.BatchMaxRequests, MaxBytes: cfg.BatchMaxBytes,
		PollMin: time.Duration(cfg.BatchPollInterval), PollMax: maxPollInterval}
	if l.MaxRequests == 0 {
		l.MaxRequests = MaxBatchRequests
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultBatchBytes
	}
	if l.PollMin == 0 {
		l.PollMin = DefaultBatchPollInterval
	}
	l.PollMax = min(max(8*l.PollMin, l.PollMin), maxPollInterval) // a short first wait stays short
	l.PollMax = max(l.PollMax, l.PollMin)
	// A file's content is bounded by the number of lines and the bound of
	// each, which BatchAnswers enforces as it reads.
	return &batchClient{base: strings.TrimRight(base, "/"), key: key, http: hc, json: mk(maxBatchObject),
		files: mk(1 << 62), limits: l}
}

var _ provider.BatchAPI = (*Provider)(nil)

// BatchEnabled implements provider.BatchAPI.
func (p *Provider) BatchEnabled() bool { return p.cfg.BatchAPI && p.batch != nil }

// BatchLimits implements provider.BatchAPI.
func (p *Provider) BatchLimits() provider.BatchLimits { return p.batch.limits }

// batchLine is one request of an input file.
type batchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// BatchLine implements provider.BatchAPI: the body is the request
// GenerateText sends for the same image and prompt, built by the same code,
// with the same repairs of go-openai's omissions (wireFix).
func (p *Provider) BatchLine(customID string, img provider.Image, prompt string) ([]byte, error) {
	if len(customID) > maxCustomID {
		return nil, fmt.Errorf("custom_id of %d bytes is over %d", len(customID), maxCustomID)
	}
	f, ok := magic.ParseMIME(img.MIME)
	if !ok {
		return nil, fmt.Errorf("image type %q is not one of image/png, image/jpeg, image/gif, image/webp", img.MIME)
	}
	body, err := json.Marshal(p.request(magic.DataURL(f, img.Data), prompt))
	if err != nil {
		return nil, err
	}
	if fix := (wireFix{emptyText: prompt == "", temperature: p.cfg.Temperature, topP: p.cfg.TopP}); fix.needed() {
		if body, err = fix.apply(body); err != nil {
			return nil, err
		}
	}
	return json.Marshal(batchLine{CustomID: customID, Method: http.MethodPost, URL: string(goopenai.BatchEndpointChatCompletions), Body: body})
}

// UploadBatch implements provider.BatchAPI: POST {base}/files, multipart
// with purpose=batch and the file, streamed from r through a pipe. It is not
// retried: r cannot be read twice; the caller makes the file again.
func (p *Provider) UploadBatch(ctx context.Context, name string, r io.Reader) (string, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		err := mw.WriteField("purpose", "batch")
		if err == nil {
			var fw io.Writer
			if fw, err = mw.CreateFormFile("file", name); err == nil {
				if _, err = io.Copy(fw, r); err == nil {
					err = mw.Close()
				}
			}
		}
		pw.CloseWithError(err) // nil: EOF
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.batch.base+"/files", pr)
	if err != nil {
		pr.CloseWithError(err)
		return "", provider.Errorf(provider.Permanent, "upload batch file: %v", err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if p.batch.key != "" {
		req.Header.Set("Authorization", "Bearer "+p.batch.key)
	}
	resp, err := p.batch.http.Do(req)
	if err != nil {
		pr.CloseWithError(err)
		return "", &provider.Error{Kind: provider.Transient, Message: p.scrub("upload batch file: " + err.Error())}
	}
	defer resp.Body.Close()
	if e := provider.Redirected(resp); e != nil {
		e.Message = p.scrub("upload batch file: " + e.Message)
		return "", e
	}
	limit := int64(maxBatchObject)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		limit = provider.MaxErrorBytes
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, limit))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := httpjson.Truncate(p.scrub(httpjson.BodyMessage(body)), maxMessage)
		return "", &provider.Error{Kind: provider.ClassifyStatus(resp.StatusCode, msg), Status: resp.StatusCode,
			Message: "upload batch file: " + msg}
	}
	var f goopenai.File
	if err := json.Unmarshal(body, &f); err != nil || f.ID == "" {
		return "", p.badResponse("upload batch file: no file id in the answer")
	}
	return f.ID, nil
}

// batchCall runs one JSON call of the Batch API with the model's retries,
// timeout and classification of failures.
func (p *Provider) batchCall(ctx context.Context, call func(ctx context.Context) error) error {
	return p.retrier.Do(ctx, func(ctx context.Context) error { return p.batchAttempt(ctx, call) })
}

// batchAttempt is one attempt of batchCall: a request to the same account
// as the model's chat requests, so it takes its turn from the model's
// governor too (a 429 pauses it like any other).
func (p *Provider) batchAttempt(ctx context.Context, call func(ctx context.Context) error) error {
	ticket, err := p.gov.Acquire(ctx, 0)
	if err != nil {
		return &provider.Error{Kind: provider.Transient, Message: err.Error(), Err: err}
	}
	actx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	ex := &exchange{}
	if err := call(withExchange(actx, ex)); err != nil {
		e := p.classify(ctx, actx, ex, err)
		ticket.Done(pace.Outcome{Header: ex.header, Status: ex.status, Limited: e.RateLimited})
		return e
	}
	ticket.Done(pace.Outcome{Header: ex.header, Status: ex.status})
	return nil
}

func jobOf(b goopenai.Batch) provider.BatchJob {
	j := provider.BatchJob{ID: b.ID, Status: b.Status, Total: b.RequestCounts.Total, Completed: b.RequestCounts.Completed,
		Failed: b.RequestCounts.Failed}
	if b.OutputFileID != nil {
		j.OutputFileID = *b.OutputFileID
	}
	if b.ErrorFileID != nil {
		j.ErrorFileID = *b.ErrorFileID
	}
	return j
}

// CreateBatch implements provider.BatchAPI.
func (p *Provider) CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (provider.BatchJob, error) {
	md := map[string]any{}
	for k, v := range metadata {
		md[k] = v
	}
	// One attempt: a create that timed out may have created the batch; the
	// caller looks for it (FindBatch) before it creates again.
	var out goopenai.BatchResponse
	err := p.batchAttempt(ctx, func(ctx context.Context) (err error) {
		out, err = p.batch.json.CreateBatch(ctx, goopenai.CreateBatchRequest{InputFileID: fileID,
			Endpoint: goopenai.BatchEndpointChatCompletions, CompletionWindow: "24h", Metadata: md})
		return err
	})
	if err != nil {
		return provider.BatchJob{}, err
	}
	if out.ID == "" {
		return provider.BatchJob{}, p.badResponse("create batch: no batch id in the answer")
	}
	return jobOf(out.Batch), nil
}

// FindBatch implements provider.BatchAPI: it lists the most recent batches
// (at most 1,000) for one over fileID.
func (p *Provider) FindBatch(ctx context.Context, fileID string) (provider.BatchJob, bool, error) {
	var after *string
	limit := 100
	for range 10 {
		var page goopenai.ListBatchResponse
		err := p.batchCall(ctx, func(ctx context.Context) (err error) {
			page, err = p.batch.json.ListBatch(ctx, after, &limit)
			return err
		})
		if err != nil {
			return provider.BatchJob{}, false, err
		}
		for _, b := range page.Data {
			if b.InputFileID == fileID {
				return jobOf(b), true, nil
			}
		}
		if !page.HasMore || page.LastID == "" {
			break
		}
		last := page.LastID
		after = &last
	}
	return provider.BatchJob{}, false, nil
}

// DeleteBatchFile deletes a file (DELETE /v1/files/{file_id},
// https://platform.openai.com/docs/api-reference/files/delete); a file
// already gone (404) is not an error.
func (p *Provider) DeleteBatchFile(ctx context.Context, fileID string) error {
	err := p.batchCall(ctx, func(ctx context.Context) error { return p.batch.json.DeleteFile(ctx, fileID) })
	if pe := (*provider.Error)(nil); errors.As(err, &pe) && pe.Status == http.StatusNotFound {
		return nil
	}
	return err
}

// CancelBatch cancels a running batch (POST /v1/batches/{id}/cancel,
// https://platform.openai.com/docs/api-reference/batch/cancel); a batch
// already final (the API answers 400 or 404 for it) is not an error.
func (p *Provider) CancelBatch(ctx context.Context, id string) error {
	err := p.batchCall(ctx, func(ctx context.Context) error {
		_, err := p.batch.json.CancelBatch(ctx, id)
		return err
	})
	if pe := (*provider.Error)(nil); errors.As(err, &pe) && (pe.Status == http.StatusNotFound || pe.Status == http.StatusBadRequest) {
		return nil
	}
	return err
}

// RetrieveBatch implements provider.BatchAPI.
func (p *Provider) RetrieveBatch(ctx context.Context, id string) (provider.BatchJob, error) {
	var out goopenai.BatchResponse
	err := p.batchCall(ctx, func(ctx context.Context) (err error) {
		out, err = p.batch.json.RetrieveBatch(ctx, id)
		return err
	})
	if err != nil {
		return provider.BatchJob{}, err
	}
	if out.ID != id {
		return provider.BatchJob{}, p.badResponse("retrieve batch %s: the answer is batch %q", id, out.ID)
	}
	return jobOf(out.Batch), nil
}

// answerLine is one line of an output or error file.
type answerLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// BatchAnswers implements provider.BatchAPI. Each line is bounded by
// provider.MaxChatAnswerBytes plus its envelope — the bound of a synchronous
// answer — and the file by maxLines lines (and as many blank ones): more
// lines fail the read before they are held. A line over the bound is not
// held; it is skipped while it is at most twice the bound, and fails the
// read beyond. So the bytes read are bounded by the lines asked for. A line
// that takes longer than the model's timeout to come fails the read too
// (Transient): a provider that trickles or stalls cannot hold the rule.
func (p *Provider) BatchAnswers(ctx context.Context, fileID string, maxLines int, each func(provider.BatchAnswer) error) error {
	var raw goopenai.RawResponse
	endBody := context.CancelFunc(func() {})
	defer func() { endBody() }()
	err := p.batchCall(ctx, func(actx context.Context) (err error) {
		// The body outlives the attempt, whose context ends when it
		// returns: the request runs on a context of its own (with the
		// attempt's values: its exchange), cancelled by the attempt's (its
		// timeout, or ctx) only until the headers came.
		body, cancel := context.WithCancel(context.WithoutCancel(actx))
		stop := context.AfterFunc(actx, cancel)
		raw, err = p.batch.files.GetFileContent(body, fileID)
		if !stop() && err == nil { // the attempt ended before the headers came
			raw.Close()
			err = actx.Err()
		}
		if err != nil {
			cancel()
			return err
		}
		endBody = cancel
		return nil
	})
	if err != nil {
		return err
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	var stalled atomic.Bool
	idle := time.AfterFunc(p.timeout, func() { stalled.Store(true); raw.Close() })
	defer idle.Stop()
	br := bufio.NewReaderSize(raw, 64<<10)
	const lineLimit = provider.MaxChatAnswerBytes + maxLineEnvelope
	for n, blank := 0, 0; ; {
		line, err := readLine(br, lineLimit)
		idle.Reset(p.timeout)
		if errors.Is(err, errLineTooLong) {
			// Over the bound of an answer: not held, not used. Its row
			// has no answer, and gets the synchronous call.
			if n++; n > maxLines {
				return p.badResponse("batch file %s has more than %d lines", fileID, maxLines)
			}
			continue
		}
		if errors.Is(err, errLineFarTooLong) {
			return p.badResponse("batch file %s: %v", fileID, err)
		}
		switch {
		case len(bytes.TrimSpace(line)) > 0:
			if n++; n > maxLines {
				return p.badResponse("batch file %s has more than %d lines", fileID, maxLines)
			}
			a, ok := p.answer(line)
			if ok {
				if err := each(a); err != nil {
					return err
				}
			}
		case err == nil: // a blank line; the empty read at the end is none
			if blank++; blank > maxLines {
				return p.badResponse("batch file %s has more than %d blank lines", fileID, maxLines)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && ctx.Err() != nil:
			return ctx.Err()
		case err != nil && stalled.Load():
			return &provider.Error{Kind: provider.Transient, Message: fmt.Sprintf("read batch file %s: no line within the timeout of %s", fileID, p.timeout)}
		case err != nil:
			return &provider.Error{Kind: provider.Transient, Message: p.scrub(fmt.Sprintf("read batch file %s: %v", fileID, err))}
		}
	}
}

// errLineTooLong is a line of a batch file over its bound; errLineFarTooLong
// one over twice its bound, which is not read to its end.
var (
	errLineTooLong    = errors.New("line too long")
	errLineFarTooLong = errors.New("line far too long")
)

// readLine reads one line of at most limit bytes, without its newline. A
// longer line is read to its end without being held, and is errLineTooLong
// (or the error that ended it); one longer than twice limit is
// errLineFarTooLong, read no further.
func readLine(br *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > limit+1 {
			for skipped := len(line) + len(chunk); errors.Is(err, bufio.ErrBufferFull); skipped += len(chunk) {
				if skipped > 2*limit+1 {
					return nil, fmt.Errorf("%w: over %d bytes", errLineFarTooLong, 2*limit)
				}
				chunk, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: over %d bytes", errLineTooLong, limit)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), err
	}
}

// answer decodes one line; ok is false for a line that names no request.
// An answer is judged like a synchronous one: a status the synchronous call
// would retry (408, 409, 429, 5xx) is Unanswered — the caller makes the call
// again — any other failure is the *provider.Error the call would give.
func (p *Provider) answer(line []byte) (a provider.BatchAnswer, ok bool) {
	var l answerLine
	if err := json.Unmarshal(line, &l); err != nil || l.CustomID == "" {
		return a, false
	}
	a.CustomID = l.CustomID
	switch {
	case l.Error != nil && (l.Error.Code == "batch_expired" || l.Error.Code == "batch_cancelled"):
		a.Unanswered = true
	case l.Response != nil && (l.Response.StatusCode < 200 || l.Response.StatusCode > 299):
		status := l.Response.StatusCode
		msg := httpjson.Truncate(p.scrub(httpjson.BodyMessage(l.Response.Body)), maxMessage)
		if msg == "" {
			msg = http.StatusText(status)
		}
		kind := provider.ClassifyStatus(status, msg)
		if kind == provider.Transient {
			a.Unanswered = true
			break
		}
		a.Err = &provider.Error{Kind: kind, Status: status, Message: msg}
	case l.Response != nil:
		var resp goopenai.ChatCompletionResponse
		if err := json.Unmarshal(l.Response.Body, &resp); err != nil {
			a.Err = p.badResponse("invalid response: %v", err)
			break
		}
		a.Completion, a.Err = p.completion(resp)
		if a.Err == nil {
			return a, true
		}
	case l.Error != nil:
		// A request the batch did not run, for a reason of its own (an
		// internal error, say): the synchronous call gives the row's
		// outcome, rather than a failure remembered as permanent.
		a.Unanswered = true
	default:
		a.Err = p.badResponse("batch answer with neither a response nor an error")
	}
	return a, true
}
