package replication

import (
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

func TestServerStopping(t *testing.T) {
	ping := pglogrepl.PrimaryKeepaliveMessage{ServerWALEnd: 0x500, ReplyRequested: true}
	tests := []struct {
		name      string
		confirmed LSN
		ka        pglogrepl.PrimaryKeepaliveMessage
		since     time.Duration // since our last status update
		want      bool
	}{
		{"back-to-back requests with unacked WAL", 0x400, ping, time.Millisecond, true},
		{"everything confirmed: the walsender exits by itself", 0x500, ping, time.Millisecond, false},
		{"ordinary request after wal_sender_timeout/2", 0x400, ping, 30 * time.Second, false},
		{"no reply requested", 0x400, pglogrepl.PrimaryKeepaliveMessage{ServerWALEnd: 0x500}, time.Millisecond, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ss := &session{p: newProgress(tt.confirmed)}
			got := false
			for i := 0; i < stoppingPings+1; i++ {
				ss.lastStatus = time.Now().Add(-tt.since)
				got = ss.serverStopping(tt.ka)
			}
			if got != tt.want {
				t.Errorf("serverStopping = %t, want %t", got, tt.want)
			}
		})
	}
	ss := &session{p: newProgress(0x400)}
	for i := 0; i < 3*stoppingPings; i++ {
		ss.lastStatus = time.Now()
		if ss.serverStopping(pglogrepl.PrimaryKeepaliveMessage{ServerWALEnd: pglogrepl.LSN(0x500 + i), ReplyRequested: true}) {
			t.Fatal("a moving WAL end is a server still at work, not one waiting to stop")
		}
	}
}
