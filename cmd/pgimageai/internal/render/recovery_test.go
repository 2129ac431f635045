package render

import (
	"errors"
	"testing"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

func TestRecoveryText(t *testing.T) {
	lost := replication.Slot{Name: "pgimageai", WALStatus: "lost", Invalidation: replication.Invalidation{InvalidationReason: "wal_removed"}}
	tests := []struct {
		name string
		rec  bridge.Recovery
		want string
	}{
		{"invalidated", bridge.Recovery{
			Old: lost, Found: true, Problem: errors.New("lost"),
			New:      replication.Slot{Name: "pgimageai", ConfirmedFlushLSN: 0x2001750},
			Progress: state.Progress{Checkpoint: pointerTo("0/1DF49F0"), Lanes: 2, Backfills: 1},
			Rules:    []string{"caption", "embed", "wb"},
			Targets: []bridge.OrphanCleanup{
				{Table: "public.captions", Rules: []string{"caption", "embed"}, Deleted: 3},
				{Table: "public.photos", Rules: []string{"wb"}, Skipped: "write-back"},
			},
		}, `slot pgimageai could not stream (wal_status lost, invalidation_reason wal_removed)
dropped slot pgimageai and re-created it at 0/2001750
forgot the checkpoint 0/1DF49F0, 2 lane checkpoints and 1 backfill state
public.captions (rules caption, embed): deleted 3 rows whose source row no longer exists
public.photos (rules wb): nothing deleted: write-back
every enabled rule (caption, embed, wb) backfills when pgimageai run starts; start it now
`},
		{"missing, no rules", bridge.Recovery{
			Old: replication.Slot{Name: "s"}, New: replication.Slot{Name: "s", ConfirmedFlushLSN: 0x100},
		}, `slot s did not exist
created slot s at 0/100
no checkpoint was stored, 0 lane checkpoints and 0 backfill states
no rule is enabled: nothing will backfill
`},
		{"forced", bridge.Recovery{
			Old: replication.Slot{Name: "s", WALStatus: "reserved"}, Found: true, New: replication.Slot{Name: "s", ConfirmedFlushLSN: 0x100},
			Rules: []string{"r"}, Targets: []bridge.OrphanCleanup{{Table: "public.t", Rules: []string{"r"}, Deleted: 1}},
		}, `slot s could stream (wal_status reserved); recovered because of --force
dropped slot s and re-created it at 0/100
no checkpoint was stored, 0 lane checkpoints and 0 backfill states
public.t (rules r): deleted 1 row whose source row no longer exists
every enabled rule (r) backfills when pgimageai run starts; start it now
`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RecoveryText(tc.rec); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
