package backfill

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/state"
)

// fakeBatchAPI answers the calls that cleanUp makes from its function
// fields and records them.
type fakeBatchAPI struct {
	provider.BatchAPI // calls not set here panic
	find              func(fileID string) (provider.BatchJob, bool, error)
	retrieve          func(id string) (provider.BatchJob, error)
	cancelled         []string
	deleted           []string
}

func (f *fakeBatchAPI) FindBatch(_ context.Context, fileID string) (provider.BatchJob, bool, error) {
	return f.find(fileID)
}
func (f *fakeBatchAPI) RetrieveBatch(_ context.Context, id string) (provider.BatchJob, error) {
	return f.retrieve(id)
}
func (f *fakeBatchAPI) CancelBatch(_ context.Context, id string) error {
	f.cancelled = append(f.cancelled, id)
	return nil
}
func (f *fakeBatchAPI) DeleteBatchFile(_ context.Context, id string) error {
	f.deleted = append(f.deleted, id)
	return nil
}

func TestCleanUp(t *testing.T) {
	gone := &provider.Error{Kind: provider.Permanent, Status: 404, Message: "No such batch"}
	down := &provider.Error{Kind: provider.Transient, Status: 503, Message: "unavailable"}
	running := func(string) (provider.BatchJob, error) {
		return provider.BatchJob{ID: "batch_1", Status: "in_progress"}, nil
	}
	tests := []struct {
		name          string
		bc            state.BatchCleanup
		noAPI         bool
		find          func(string) (provider.BatchJob, bool, error)
		retrieve      func(string) (provider.BatchJob, error)
		wantDone      bool
		wantErr       bool
		wantCancelled []string
		wantDeleted   []string
	}{
		{name: "running: cancelled, files later", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			retrieve: running, wantCancelled: []string{"batch_1"}},
		{name: "cancelling: nothing yet", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			retrieve: func(string) (provider.BatchJob, error) { return provider.BatchJob{Status: "cancelling"}, nil }},
		{name: "final: its files and the output deleted", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			retrieve: func(string) (provider.BatchJob, error) {
				return provider.BatchJob{Status: "cancelled", OutputFileID: "out", ErrorFileID: "err"}, nil
			}, wantDone: true, wantDeleted: []string{"in", "out", "err"}},
		{name: "gone at the provider: the files", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			retrieve: func(string) (provider.BatchJob, error) { return provider.BatchJob{}, gone }, wantDone: true, wantDeleted: []string{"in"}},
		{name: "provider down: retried", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			retrieve: func(string) (provider.BatchJob, error) { return provider.BatchJob{}, down }, wantErr: true},
		{name: "never recorded, but created: found by its file", bc: state.BatchCleanup{InputFileID: "in", Files: []string{"in"}},
			find:     func(string) (provider.BatchJob, bool, error) { return provider.BatchJob{ID: "batch_1"}, true, nil },
			retrieve: running, wantCancelled: []string{"batch_1"}},
		{name: "never created: the input file", bc: state.BatchCleanup{InputFileID: "in", Files: []string{"in"}},
			find: func(string) (provider.BatchJob, bool, error) { return provider.BatchJob{}, false, nil }, wantDone: true, wantDeleted: []string{"in"}},
		{name: "no API for its model: left to the operator", bc: state.BatchCleanup{BatchID: "batch_1", Files: []string{"in"}},
			noAPI: true, wantDone: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeBatchAPI{find: tt.find, retrieve: tt.retrieve}
			var a provider.BatchAPI = api
			if tt.noAPI {
				a = nil
			}
			done, err := cleanUp(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), a, tt.bc)
			if (err != nil) != tt.wantErr || done != tt.wantDone {
				t.Fatalf("done %v, err %v; want done %v, error %v", done, err, tt.wantDone, tt.wantErr)
			}
			if !slices.Equal(api.cancelled, tt.wantCancelled) || !slices.Equal(api.deleted, tt.wantDeleted) {
				t.Errorf("cancelled %v, deleted %v; want %v, %v", api.cancelled, api.deleted, tt.wantCancelled, tt.wantDeleted)
			}
		})
	}
}
