package render

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgimageai/pgimageai/replication"
)

func TestWriteStatusTable(t *testing.T) {
	lost := sampleStatus()
	lost.Slot.Active, lost.Slot.ActivePID, lost.Slot.WALStatus, lost.Slot.InvalidationReason = false, 0, "lost", "wal_removed"
	lost.Slot.CurrentLSN = lost.Slot.ConfirmedFlushLSN
	lost.Slot.Leader = nil // an invalidated slot stops the bridge
	lost.Slot.Squatters = nil
	lost.Checkpoint, lost.Rules, lost.Lanes, lost.Backfills, lost.OpenErrors, lost.Usage = nil, nil, nil, nil, nil, nil

	atRisk := sampleStatus()
	atRisk.Slot.WALStatus, atRisk.Slot.SafeWALSize = "unreserved", pointerTo[int64](-8192)
	atRisk.Rules, atRisk.Lanes, atRisk.Backfills, atRisk.OpenErrors, atRisk.Usage = nil, nil, nil, nil, nil
	lostOld := lost // PostgreSQL 13 to 16: no invalidation_reason
	lostOld.Slot.InvalidationReason = ""

	tests := []struct {
		name string
		r    Status
		want string
	}{
		{"everything", sampleStatus(), `Slot
  name                 pgimageai
  leader               pid 4240, role pgimageai_bridge, application "pgimageai", client 10.0.0.5
  lock key held by     pid 4300, role app, not the leader: ignored
  plugin               pgoutput
  database             shop
  active               yes (pid 4242)
  wal_status           reserved
  safe_wal_size        unlimited (max_slot_wal_keep_size = -1)
  confirmed_flush_lsn  0/1A2B3C0
  current_wal_lsn      0/1F2B892
  lag                  5244114 bytes (5.0 MiB)
  checkpoint           0/1A2B3C0 (updated 2025-03-01T12:04:05Z)

Rules
  NAME     ENABLED  FUNCTION           MODEL  SOURCE                            TARGET                   STATUS
  caption  yes      AI_IMAGE_COMPLETE  gpt    public.photos.img              →  public.captions.caption  valid
  embed    yes      AI_IMAGE_EMBED     gpt    public.photos.img              →  public.vectors.v         invalid: model gpt: provider openai cannot AI_IMAGE_EMBED
  old      no       AI_IMAGE_COMPLETE  gpt    "Odd Schema"."My Table"."Pic"  →  public.old.text          disabled

Lanes (one per target table)
  LANE             APPLIED             LAG                      LAST COMMIT           DELAY  PENDING  OLDEST PENDING  UPDATED
  public.captions  0/1F2B000#50331648  2194 bytes (2.1 KiB)     2025-03-01T12:04:05Z  2s     -        -               2025-03-01T12:04:05Z
  public.vectors   0/1A00000#16777217  5244114 bytes (5.0 MiB)  2025-03-01T12:03:05Z  1m2s   40       1m35s           2025-03-01T12:04:05Z

Backfills
  RULE     STATE    ROWS     UPDATED
  caption  done     120/120  2025-03-01T12:04:05Z
  embed    running  40       2025-03-01T12:04:05Z

Open errors: 8 (list them with pgimageai errors)
  REASON          COUNT
  empty_image     4
  provider_error  3
  invalid_rule    1

  RULE     REASON          COUNT
  caption  empty_image     2
  caption  provider_error  3
  embed    invalid_rule    1
  old      empty_image     2

Usage (last 7 days, UTC)
  DAY         RULE     MODEL  CALLS  PROMPT_TOKENS  COMPLETION_TOKENS
  2025-03-01  caption  gpt    118    101480         4130
`},
		{"slot missing", statusOf("pgimageai"), `Slot
  name        pgimageai
  state       not created yet (run pgimageai run)
  checkpoint  none stored yet

Rules: none (insert rows into pgimageai.rules)

Lanes: none

Backfills: none

Open errors: none

Usage (last 7 days, UTC): none
`},
		{"slot lost", lost, `Slot
  name                 pgimageai
  plugin               pgoutput
  database             shop
  active               no
  wal_status           lost
  safe_wal_size        none (WAL lost)
  invalidated          wal_removed: the slot can no longer stream; stop pgimageai run if it still runs, then run pgimageai recover-slot and start pgimageai run again (every rule backfills)
  confirmed_flush_lsn  0/1A2B3C0
  current_wal_lsn      0/1A2B3C0
  lag                  0 bytes
  checkpoint           none stored yet

Rules: none (insert rows into pgimageai.rules)

Lanes: none

Backfills: none

Open errors: none

Usage (last 7 days, UTC): none
`},
		{"slot at risk", atRisk, `Slot
  name                 pgimageai
  leader               pid 4240, role pgimageai_bridge, application "pgimageai", client 10.0.0.5
  lock key held by     pid 4300, role app, not the leader: ignored
  plugin               pgoutput
  database             shop
  active               yes (pid 4242)
  wal_status           unreserved
  safe_wal_size        -8192 bytes (the slot is about to lose WAL it needs)
  warning              wal_status unreserved: the slot is behind by more than max_slot_wal_keep_size and the next checkpoint removes WAL it needs, invalidating it; let pgimageai run catch up (is it running?) or raise max_slot_wal_keep_size
  confirmed_flush_lsn  0/1A2B3C0
  current_wal_lsn      0/1F2B892
  lag                  5244114 bytes (5.0 MiB)
  checkpoint           0/1A2B3C0 (updated 2025-03-01T12:04:05Z)

Rules: none (insert rows into pgimageai.rules)

Lanes: none

Backfills: none

Open errors: none

Usage (last 7 days, UTC): none
`},
		{"slot lost without invalidation_reason", lostOld, `Slot
  name                 pgimageai
  plugin               pgoutput
  database             shop
  active               no
  wal_status           lost
  safe_wal_size        none (WAL lost)
  invalidated          WAL lost: the slot can no longer stream; stop pgimageai run if it still runs, then run pgimageai recover-slot and start pgimageai run again (every rule backfills)
  confirmed_flush_lsn  0/1A2B3C0
  current_wal_lsn      0/1A2B3C0
  lag                  0 bytes
  checkpoint           none stored yet

Rules: none (insert rows into pgimageai.rules)

Lanes: none

Backfills: none

Open errors: none

Usage (last 7 days, UTC): none
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := WriteStatus(&out, tc.r, FormatTable); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestSafeWALSize(t *testing.T) {
	tests := []struct {
		name string
		size *int64
		wal  string
		want string
	}{
		{"limited", pointerTo[int64](1 << 30), "reserved", "1073741824 bytes (1.0 GiB)"},
		{"unlimited", nil, "reserved", "unlimited (max_slot_wal_keep_size = -1)"},
		{"lost", nil, "lost", "none (WAL lost)"},
		{"overdrawn", pointerTo[int64](-8192), "unreserved", "-8192 bytes (the slot is about to lose WAL it needs)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := SlotStatus{Slot: replication.Slot{WALStatus: tc.wal}, HasSafeWALSize: true, SafeWALSize: tc.size}
			if got := safeWALSize(s); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// decodeJSON runs write, checks that it wrote one JSON document and decodes it.
func decodeJSON(t *testing.T, write func(*bytes.Buffer) error) map[string]any {
	t.Helper()
	var out bytes.Buffer
	if err := write(&out); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(&out)
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode %s: %v", out.String(), err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document")
	}
	return doc
}

func TestWriteStatusJSON(t *testing.T) {
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, sampleStatus(), FormatJSON) })
	want := map[string]any{
		"slot": map[string]any{
			"name": "pgimageai", "exists": true, "plugin": "pgoutput", "database": "shop", "active": true, "active_pid": 4242.0,
			"wal_status": "reserved", "safe_wal_size": nil, "confirmed_flush_lsn": "0/1A2B3C0",
			"current_wal_lsn": "0/1F2B892", "lag_bytes": 5244114.0, "health": "ok",
			"leader":    map[string]any{"pid": 4240.0, "role": "pgimageai_bridge", "application": "pgimageai", "client": "10.0.0.5"},
			"squatters": []any{map[string]any{"pid": 4300.0, "role": "app"}},
		},
		"checkpoint": map[string]any{"lsn": "0/1A2B3C0", "updated_at": "2025-03-01T12:04:05Z"},
		"open_errors": map[string]any{
			"total":     8.0,
			"by_reason": map[string]any{"empty_image": 4.0, "provider_error": 3.0, "invalid_rule": 1.0},
			"by_rule": map[string]any{
				"caption": map[string]any{"empty_image": 2.0, "provider_error": 3.0},
				"embed":   map[string]any{"invalid_rule": 1.0},
				"old":     map[string]any{"empty_image": 2.0},
			},
		},
	}
	for k, v := range want {
		if !reflect.DeepEqual(doc[k], v) {
			t.Errorf("%s = %#v, want %#v", k, doc[k], v)
		}
	}
	rules := doc["rules"].([]any)
	if len(rules) != 3 {
		t.Fatalf("rules = %v", rules)
	}
	embed := rules[1].(map[string]any)
	if embed["status"] != "invalid" || embed["invalid_reason"] != "model gpt: provider openai cannot AI_IMAGE_EMBED" {
		t.Errorf("embed = %v", embed)
	}
	if old := rules[2].(map[string]any); old["status"] != "disabled" || old["invalid_reason"] != nil || old["source_table"] != `"Odd Schema"."My Table"` {
		t.Errorf("old = %v", old)
	}
	lanes := doc["lanes"].([]any)
	wantLanes := []any{
		map[string]any{"lane": "public.captions", "lsn": "0/1F2B000", "ord": 50331648.0, "commit_time": "2025-03-01T12:04:05Z",
			"lag_bytes": 2194.0, "delay_seconds": 2.0, "updated_at": "2025-03-01T12:04:05Z", "pending": nil, "oldest_pending_seconds": nil},
		map[string]any{"lane": "public.vectors", "lsn": "0/1A00000", "ord": 16777217.0, "commit_time": "2025-03-01T12:03:05Z",
			"lag_bytes": 5244114.0, "delay_seconds": 62.0, "updated_at": "2025-03-01T12:04:05Z", "pending": 40.0, "oldest_pending_seconds": 95.0},
	}
	if !reflect.DeepEqual(lanes, wantLanes) {
		t.Errorf("lanes = %#v, want %#v", lanes, wantLanes)
	}
	backfills := doc["backfills"].([]any)
	if b := backfills[1].(map[string]any); b["rows_total"] != nil || b["rows_done"] != 40.0 || b["state"] != "running" {
		t.Errorf("backfill = %v", b)
	}
}

func TestWriteStatusJSONSlot(t *testing.T) {
	found := func(edit func(*SlotStatus)) Status {
		r := sampleStatus()
		r.Slot.Leader, r.Slot.Squatters = nil, nil // TestWriteStatusJSON shows them
		edit(&r.Slot)
		return r
	}
	tests := []struct {
		name string
		r    Status
		want map[string]any
	}{
		{"missing", statusOf("s"), map[string]any{"name": "s", "exists": false}},
		{"no safe_wal_size before PostgreSQL 13", found(func(s *SlotStatus) { s.HasSafeWALSize, s.Active, s.ActivePID = false, false, 0 }),
			map[string]any{"name": "pgimageai", "exists": true, "plugin": "pgoutput", "database": "shop", "active": false, "wal_status": "reserved",
				"confirmed_flush_lsn": "0/1A2B3C0", "current_wal_lsn": "0/1F2B892", "lag_bytes": 5244114.0, "health": "ok"}},
		{"limited safe_wal_size", found(func(s *SlotStatus) { s.SafeWALSize = pointerTo[int64](1 << 30) }),
			map[string]any{"name": "pgimageai", "exists": true, "plugin": "pgoutput", "database": "shop", "active": true, "active_pid": 4242.0,
				"wal_status": "reserved", "safe_wal_size": 1073741824.0, "confirmed_flush_lsn": "0/1A2B3C0",
				"current_wal_lsn": "0/1F2B892", "lag_bytes": 5244114.0, "health": "ok"}},
		{"at risk", found(func(s *SlotStatus) { s.WALStatus, s.SafeWALSize = "unreserved", pointerTo[int64](-8192) }),
			map[string]any{"name": "pgimageai", "exists": true, "plugin": "pgoutput", "database": "shop", "active": true, "active_pid": 4242.0,
				"wal_status": "unreserved", "safe_wal_size": -8192.0, "confirmed_flush_lsn": "0/1A2B3C0",
				"current_wal_lsn": "0/1F2B892", "lag_bytes": 5244114.0, "health": "at_risk",
				"advice": "wal_status unreserved: the slot is behind by more than max_slot_wal_keep_size and the next checkpoint removes WAL it needs, invalidating it; let pgimageai run catch up (is it running?) or raise max_slot_wal_keep_size"}},
		{"lost", found(func(s *SlotStatus) {
			s.WALStatus, s.InvalidationReason, s.SafeWALSize, s.Active, s.ActivePID = "lost", "wal_removed", nil, false, 0
		}),
			map[string]any{"name": "pgimageai", "exists": true, "plugin": "pgoutput", "database": "shop", "active": false,
				"wal_status": "lost", "invalidation_reason": "wal_removed", "safe_wal_size": nil, "confirmed_flush_lsn": "0/1A2B3C0",
				"current_wal_lsn": "0/1F2B892", "lag_bytes": 5244114.0, "health": "invalidated",
				"advice": "wal_removed: the slot can no longer stream; stop pgimageai run if it still runs, then run pgimageai recover-slot and start pgimageai run again (every rule backfills)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, tc.r, FormatJSON) })
			if !reflect.DeepEqual(doc["slot"], tc.want) {
				t.Errorf("slot = %#v\nwant %#v", doc["slot"], tc.want)
			}
		})
	}
	empty := decodeJSON(t, func(b *bytes.Buffer) error {
		return WriteStatus(b, statusOf("s"), FormatJSON)
	})
	// Empty lists are [] and {}, never null, so that scripts can iterate.
	if empty["checkpoint"] != nil || !reflect.DeepEqual(empty["rules"], []any{}) || !reflect.DeepEqual(empty["backfills"], []any{}) ||
		!reflect.DeepEqual(empty["open_errors"], map[string]any{"total": 0.0, "by_reason": map[string]any{}, "by_rule": map[string]any{}}) {
		t.Errorf("empty status = %v", empty)
	}
}

func TestSlotLag(t *testing.T) {
	tests := []struct {
		name               string
		confirmed, current replication.LSN
		want               uint64
	}{
		{"behind", 0x100, 0x1100, 0x1000},
		{"caught up", 0x100, 0x100, 0},
		{"standby replay behind the slot", 0x200, 0x100, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := SlotStatus{Slot: replication.Slot{ConfirmedFlushLSN: tc.confirmed}, CurrentLSN: tc.current}
			if got := s.Lag(); got != tc.want {
				t.Errorf("Lag() = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWriteStatusGroups(t *testing.T) {
	r := statusOf("pgimageai")
	r.Groups = []GroupStatus{
		{Group: "default", Rules: 3, Enabled: 2, Slot: "pgimageai", Found: true, Active: true, Lag: 2048},
		{Group: "thumbs", Rules: 1, Enabled: 1, Slot: "pgimageai_thumbs"},
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Rule groups (pgimageai run --group NAME; each with its own slot)
  GROUP    RULES  ENABLED  SLOT              STATE            LAG
  default  3      2        pgimageai         streaming        2048 bytes (2.0 KiB)
  thumbs   1      1        pgimageai_thumbs  not created yet  -
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("status lacks the groups table:\n%s\nwant:\n%s", b.String(), want)
	}
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, r, FormatJSON) })
	wantJSON := []any{
		map[string]any{"group": "default", "rules": 3.0, "enabled": 2.0, "slot": "pgimageai", "slot_exists": true, "active": true, "lag_bytes": 2048.0},
		map[string]any{"group": "thumbs", "rules": 1.0, "enabled": 1.0, "slot": "pgimageai_thumbs", "slot_exists": false, "active": false, "lag_bytes": nil},
	}
	if !reflect.DeepEqual(doc["groups"], wantJSON) {
		t.Errorf("groups = %#v, want %#v", doc["groups"], wantJSON)
	}
	// One default group: no table.
	r.Groups = r.Groups[:1]
	b.Reset()
	WriteStatus(&b, r, FormatTable)
	if strings.Contains(b.String(), "Rule groups") {
		t.Errorf("a table for the default group alone:\n%s", b.String())
	}
}

func TestWriteStatusModels(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	r := statusOf("pgimageai")
	r.Models = []modelPace{
		{Model: "gpt", InFlight: 5, Limit: 6, Ceil: 64, LimitBy: "429 backoff", Pace: "19.4 of 20 req/s, by x-ratelimit", Limited1m: 3, Answered1m: 1160,
			Waited: 95 * time.Second, RateLimited: true, UpdatedAt: at, Age: 2 * time.Second},
		{Model: "old", Limit: 8, Ceil: 64, Pace: "not paced", UpdatedAt: at, Age: time.Hour},
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Model pacing
  MODEL  IN FLIGHT  LIMIT                 PACE                              429s/MIN  WAITED  STATE                         UPDATED
  gpt    5          6 of 64, 429 backoff  19.4 of 20 req/s, by x-ratelimit  3         1m35s   rate-limited                  2026-12-04T10:00:00Z
  old    0          8 of 64               not paced                         0         0s      stale (no leader storing it)  2026-12-04T10:00:00Z
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("status lacks the pacing table:\n%s\nwant:\n%s", b.String(), want)
	}
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, r, FormatJSON) })
	models, _ := doc["models"].([]any)
	if len(models) != 2 {
		t.Fatalf("models = %#v", doc["models"])
	}
	gpt := models[0].(map[string]any)
	if gpt["pace"] != "19.4 of 20 req/s, by x-ratelimit" || gpt["concurrency"] != 6.0 || gpt["concurrency_by"] != "429 backoff" || gpt["max_concurrency"] != 64.0 ||
		gpt["rate_limited_last_minute"] != 3.0 || gpt["waited_seconds"] != 95.0 || gpt["rate_limited"] != true || gpt["stale"] != false {
		t.Errorf("gpt = %#v", gpt)
	}
	if models[1].(map[string]any)["stale"] != true {
		t.Errorf("old = %#v, want stale", models[1])
	}
}

func TestWriteStatusBatches(t *testing.T) {
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	r := statusOf("pgimageai")
	r.Batches = []batchRow{
		{Rule: "caption", Seq: 1, BatchID: "batch_1", Status: "completed", Requests: 1000, Completed: 997, Failed: 3,
			Downloaded: true, Applied: true, Created: at, Age: 2*time.Hour + 5*time.Minute},
		{Rule: "caption", Seq: 2, BatchID: "batch_2", Status: "in_progress", Requests: 500, Completed: 120, Created: at, Age: 90 * time.Second},
		{Rule: "caption", Seq: 3, BatchID: "batch_3", Status: "expired", Requests: 40, Completed: 25, Downloaded: true, Created: at, Age: time.Minute},
		{Rule: "caption", Seq: 4, Status: "refused", Requests: 20, Created: at, Age: time.Second},
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, r, FormatTable); err != nil {
		t.Fatal(err)
	}
	want := `Batches (backfills through a batch API)
  RULE     SEQ  BATCH    STATUS                                    REQUESTS                    AGE
  caption  1    batch_1  completed, applied                        997 done, 3 failed of 1000  2h5m0s
  caption  2    batch_2  in_progress                               120 done, 0 failed of 500   1m30s
  caption  3    batch_3  expired, applying                         25 done, 0 failed of 40     1m0s
  caption  4    -        refused (its rows get synchronous calls)  0 done, 0 failed of 20      1s
`
	if !strings.Contains(b.String(), want) {
		t.Errorf("status lacks the batches table:\n%s\nwant:\n%s", b.String(), want)
	}
	if strings.Contains(sampleStatusTable(t), "Batches") {
		t.Error("a status without batches shows a batches table")
	}
	doc := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, r, FormatJSON) })
	batches, _ := doc["batches"].([]any)
	if len(batches) != 4 {
		t.Fatalf("batches = %#v", doc["batches"])
	}
	want1 := map[string]any{"rule": "caption", "seq": 1.0, "batch_id": "batch_1", "status": "completed", "requests": 1000.0,
		"completed": 997.0, "failed": 3.0, "answers_stored": true, "applied": true, "created_at": "2026-12-04T10:00:00Z", "age_seconds": 7500.0}
	if !reflect.DeepEqual(batches[0], want1) {
		t.Errorf("batch 1 = %#v, want %#v", batches[0], want1)
	}
	if b4 := batches[3].(map[string]any); b4["batch_id"] != nil || b4["status"] != "refused" {
		t.Errorf("batch 4 = %#v, want no batch_id, refused", b4)
	}
	empty := decodeJSON(t, func(b *bytes.Buffer) error { return WriteStatus(b, sampleStatus(), FormatJSON) })
	if l, ok := empty["batches"].([]any); !ok || len(l) != 0 {
		t.Errorf("batches without any = %#v, want []", empty["batches"])
	}
}

func sampleStatusTable(t *testing.T) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteStatus(&b, sampleStatus(), FormatTable); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
