package provider

import (
	"context"
	"io"
	"time"

	"github.com/pgimageai/pgimageai/value"
)

// BatchAPI is the capability of a provider to run a backfill's calls as one
// asynchronous batch at a lower price (OpenAI's Batch API: half the price of
// the synchronous API, answered within 24 hours). Live changes never use it.
// Implementations are safe for concurrent use.
type BatchAPI interface {
	// BatchEnabled reports whether the model's options ask for it
	// (batch_api: true).
	BatchEnabled() bool
	// BatchLimits are what one batch may hold (requests, bytes of its input
	// file) and how often a running batch is polled at most and at least.
	BatchLimits() BatchLimits
	// BatchLine returns one line of a batch input file (no newline): the
	// request the synchronous call of img and prompt would send, named
	// customID.
	BatchLine(customID string, img Image, prompt string) ([]byte, error)
	// UploadBatch uploads an input file read from r (streamed, never held
	// whole) and returns its file ID.
	UploadBatch(ctx context.Context, name string, r io.Reader) (fileID string, err error)
	// CreateBatch starts a batch over an uploaded input file.
	CreateBatch(ctx context.Context, fileID string, metadata map[string]string) (BatchJob, error)
	// FindBatch returns the batch created over fileID, if there is one: after
	// a crash between creating a batch and recording it.
	FindBatch(ctx context.Context, fileID string) (BatchJob, bool, error)
	// RetrieveBatch returns a batch's current state.
	RetrieveBatch(ctx context.Context, id string) (BatchJob, error)
	// BatchAnswers reads an output or error file line by line, at most
	// maxLines lines, each bounded like a synchronous answer, and calls each
	// for every line.
	BatchAnswers(ctx context.Context, fileID string, maxLines int, each func(BatchAnswer) error) error
	// DeleteBatchFile deletes an uploaded input file or a batch's output or
	// error file: the images and answers they hold do not stay at the
	// provider once applied. A file already gone is not an error.
	DeleteBatchFile(ctx context.Context, fileID string) error
	// CancelBatch cancels a running batch (of a backfill that stopped). A
	// batch already final is not an error.
	CancelBatch(ctx context.Context, id string) error
}

// BatchLimits bound a batch and pace its polling.
type BatchLimits struct {
	MaxRequests int
	MaxBytes    int64
	PollMin     time.Duration
	PollMax     time.Duration
}

// BatchJob is the state of one batch.
type BatchJob struct {
	ID           string
	Status       string // validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled
	OutputFileID string
	ErrorFileID  string
	Total        int
	Completed    int
	Failed       int
}

// Final reports whether the batch will not change any more.
func (j BatchJob) Final() bool {
	switch j.Status {
	case value.BatchCompleted, value.BatchFailed, value.BatchExpired, value.BatchCancelled:
		return true
	}
	return false
}

// BatchAnswer is one line of a batch's output or error file: the answer to
// the request named CustomID, or why there is none. Unanswered is set when
// the request was never run (the batch expired or was cancelled before it):
// the caller may make it again.
type BatchAnswer struct {
	CustomID   string
	Completion Completion
	Err        error // a *Error, as the synchronous call would have failed
	Unanswered bool
}
