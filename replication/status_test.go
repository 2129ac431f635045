package replication

import (
	"testing"
	"time"
)

// TestStatusReportsAckedPositions: the standby status updates the client
// sends, as the server decodes them, confirm the highest ack as the flush
// and the apply position (never less than the start, never back), report
// the highest position received as the write position (never below flush),
// and are sent only when the flush position moved unless forced.
func TestStatusReportsAckedPositions(t *testing.T) {
	f := newFakeServer(t)
	out := make(chan Event, 1)
	ss := blockedSession(t, f, time.Hour, out)
	ss.lastRecv = time.Now()
	steps := []struct {
		name     string
		received LSN // the server sent WAL up to here; 0 = nothing new
		ack      LSN // the consumer acked this; 0 = nothing new
		force    bool
		want     *standbyStatus // nil = no update sent
	}{
		{name: "forced at the start", force: true, want: &standbyStatus{Write: 0x100, Flush: 0x100, Apply: 0x100}},
		{name: "an ack moves flush and apply", ack: 0x180, want: &standbyStatus{Write: 0x180, Flush: 0x180, Apply: 0x180}},
		{name: "nothing moved: nothing sent", want: nil},
		{name: "received past the ack", received: 0x300, ack: 0x200, want: &standbyStatus{Write: 0x300, Flush: 0x200, Apply: 0x200}},
		{name: "an older ack confirms nothing less", ack: 0x150, force: true, want: &standbyStatus{Write: 0x300, Flush: 0x200, Apply: 0x200}},
		{name: "the ack reaches what was received", ack: 0x300, want: &standbyStatus{Write: 0x300, Flush: 0x300, Apply: 0x300}},
	}
	sent := 0
	for _, st := range steps {
		if st.received != 0 {
			ss.p.receive(st.received)
		}
		if st.ack != 0 {
			ss.s.Ack(st.ack)
		}
		if err := ss.status(t.Context(), st.force); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if st.want == nil {
			continue // the next update that arrives shows that none was sent here
		}
		sent++
		deadline := time.Now().Add(5 * time.Second)
		var got []standbyStatus
		for got = f.received(t); len(got) < sent && time.Now().Before(deadline); got = f.received(t) {
			time.Sleep(5 * time.Millisecond)
		}
		if len(got) != sent {
			t.Fatalf("%s: the server has %d status updates, want %d: %+v", st.name, len(got), sent, got)
		}
		last := got[sent-1]
		last.ReplyRequested = false
		if last != *st.want {
			t.Errorf("%s: the server decoded %+v, want %+v", st.name, last, *st.want)
		}
		if c := ss.s.confirmed.Load(); LSN(c) != st.want.Flush {
			t.Errorf("%s: the stream reports %s confirmed, want %s", st.name, LSN(c), st.want.Flush)
		}
	}
}
