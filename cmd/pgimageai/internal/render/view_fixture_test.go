package render

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/pgimageai/pgimageai/bridge/leader"
	"github.com/pgimageai/pgimageai/replication"
)

// fixtureTime is a fixed time for rendering tests; rendering shows it in UTC.
var fixtureTime = time.Date(2025, 3, 1, 13, 4, 5, 0, time.FixedZone("CET", 3600))

func pointerTo[T any](v T) *T { return &v }

// statusOf is the status of a slot that does not exist, and nothing else.
func statusOf(slot string) Status {
	var r Status
	r.Slot = SlotStatus{Slot: replication.Slot{Name: slot}}
	return r
}

// sampleStatus is a status with every section filled in.
func sampleStatus() Status {
	var r Status
	r.Slot = SlotStatus{
		Slot: replication.Slot{
			Name: "pgimageai", Type: "logical", Plugin: "pgoutput", Database: "shop", Active: true,
			RestartLSN: 0x1A2B000, ConfirmedFlushLSN: 0x1A2B3C0, WALStatus: "reserved",
		},
		Found: true, ActivePID: 4242, HasSafeWALSize: true, CurrentLSN: 0x1A2B3C0 + 5<<20 + 1234,
		Leader:    &leader.Info{PID: 4240, Role: "pgimageai_bridge", Application: "pgimageai", Client: "10.0.0.5"},
		Squatters: []leader.Holder{{PID: 4300, Role: "app"}},
	}
	r.Checkpoint = &checkpoint{LSN: 0x1A2B3C0, UpdatedAt: fixtureTime}
	r.Rules = []ruleStatus{
		{Name: "caption", Function: "AI_IMAGE_COMPLETE", Model: "gpt", SourceTable: "public.photos", ImageColumn: "img",
			TargetTable: "public.captions", TargetColumn: "caption", Enabled: true},
		{Name: "embed", Function: "AI_IMAGE_EMBED", Model: "gpt", SourceTable: "public.photos", ImageColumn: "img",
			TargetTable: "public.vectors", TargetColumn: "v", Enabled: true,
			Invalid: "model gpt: provider openai cannot AI_IMAGE_EMBED"},
		{Name: "old", Function: "AI_IMAGE_COMPLETE", Model: "gpt", SourceTable: `"Odd Schema"."My Table"`, ImageColumn: "Pic",
			TargetTable: "public.old", TargetColumn: "text", Enabled: false},
	}
	r.Lanes = []laneStatus{
		{Lane: "public.captions", LSN: 0x1F2B000, Ord: 3 << 24, CommitTime: pointerTo(fixtureTime), UpdatedAt: fixtureTime,
			Delay: pointerTo(2 * time.Second)},
		{Lane: "public.vectors", LSN: 0x1A00000, Ord: 16777217, CommitTime: pointerTo(fixtureTime.Add(-time.Minute)), UpdatedAt: fixtureTime,
			Delay: pointerTo(62 * time.Second), Pending: pointerTo(int64(40)), OldestPending: pointerTo(95 * time.Second)},
	}
	r.Backfills = []backfill{
		{Rule: "caption", State: "done", RowsDone: 120, RowsTotal: pointerTo[int64](120), UpdatedAt: fixtureTime},
		{Rule: "embed", State: "running", RowsDone: 40, UpdatedAt: fixtureTime},
	}
	r.OpenErrors = []errorCount{
		{Rule: "caption", Reason: "empty_image", Count: 2},
		{Rule: "caption", Reason: "provider_error", Count: 3},
		{Rule: "embed", Reason: "invalid_rule", Count: 1},
		{Rule: "old", Reason: "empty_image", Count: 2},
	}
	r.Usage = []usageRow{
		{Rule: "caption", Model: "gpt", Day: time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), Calls: 118, PromptTokens: 101480, CompletionTokens: 4130},
	}
	return r
}

// sampleErrors is a page of two of five matching errors.
func sampleErrors() ErrorList {
	return ErrorList{
		Matching: 5,
		Errors: []openError{
			{ID: 12, Rule: "caption", SourceTable: "public.photos", SourceKey: json.RawMessage(`{"id": 42}`),
				Reason: "provider_error", Detail: "model gpt: HTTP 400: " + strings.Repeat("x", 120) + "\nsecond line",
				ImageBytes: pointerTo[int32](2048), LSN: pointerTo(replication.LSN(0x1A2B3C0)), Attempts: 3, CreatedAt: fixtureTime},
			{ID: 7, Rule: "caption", SourceTable: "public.photos", SourceKey: json.RawMessage(`{"id": 7}`),
				Reason: "empty_image", Detail: "image is empty\tbut\x1b[31mred", Attempts: 1, CreatedAt: fixtureTime.Add(-time.Hour)},
		},
	}
}
