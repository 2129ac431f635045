package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSlotMetrics(t *testing.T) {
	safe := int64(1 << 30)
	tests := []struct {
		name    string
		slot    Slot
		err     error
		want    string
		wantNot []string
	}{
		{"reserved, limited", Slot{Name: "s", Found: true, Active: true, WALStatus: "reserved", SafeWALSize: &safe, RetainedBytes: 4096}, nil, `
pgimageai_slot_active{slot="s"} 1
pgimageai_slot_retained_wal_bytes{slot="s"} 4096
pgimageai_slot_safe_wal_size_bytes{slot="s"} 1.073741824e+09
pgimageai_slot_up{slot="s"} 1
pgimageai_slot_wal_status{slot="s",wal_status="extended"} 0
pgimageai_slot_wal_status{slot="s",wal_status="lost"} 0
pgimageai_slot_wal_status{slot="s",wal_status="reserved"} 1
pgimageai_slot_wal_status{slot="s",wal_status="unreserved"} 0
`, nil},
		{"unreserved, unlimited", Slot{Name: "s", Found: true, WALStatus: "unreserved"}, nil, `
pgimageai_slot_active{slot="s"} 0
pgimageai_slot_retained_wal_bytes{slot="s"} 0
pgimageai_slot_up{slot="s"} 1
pgimageai_slot_wal_status{slot="s",wal_status="extended"} 0
pgimageai_slot_wal_status{slot="s",wal_status="lost"} 0
pgimageai_slot_wal_status{slot="s",wal_status="reserved"} 0
pgimageai_slot_wal_status{slot="s",wal_status="unreserved"} 1
`, []string{"safe_wal_size"}},
		{"missing", Slot{Name: "s"}, nil, "\npgimageai_slot_up{slot=\"s\"} 0\n", []string{"wal_status", "active"}},
		{"unreachable", Slot{Name: "s"}, errors.New("connection refused"), "\npgimageai_slot_up{slot=\"s\"} 0\n", []string{"wal_status"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New()
			m.SetSlotSource(func(context.Context) (Slot, error) { return tt.slot, tt.err })
			rec := httptest.NewRecorder()
			m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
			got := rec.Body.String()
			for _, line := range strings.Split(strings.TrimSpace(tt.want), "\n") {
				if !strings.Contains(got, line+"\n") {
					t.Errorf("missing %q in\n%s", line, got)
				}
			}
			for _, not := range tt.wantNot {
				if strings.Contains(got, "pgimageai_slot_"+not+"{") {
					t.Errorf("unexpected %s in\n%s", not, got)
				}
			}
		})
	}
}
