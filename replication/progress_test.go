package replication

import "testing"

func TestProgressSkipsBelowFloor(t *testing.T) {
	p := newProgress(0x100)
	if p.begin(0xF0) {
		t.Fatal("a transaction that committed below start must be skipped")
	}
	if p.message(true, 0xF8) {
		t.Error("a message of a skipped transaction must be skipped")
	}
	if p.commitReceived() {
		t.Fatal("its Commit must be skipped too")
	}
	if !p.begin(0x100) {
		t.Fatal("a commit at start must be emitted")
	}
	p.open = true
	if !p.commitReceived() {
		t.Fatal("commit not emitted")
	}
	p.committed(0x128)
	// After a reconnect the server sends the same transaction again.
	if p.lost() {
		t.Error("no Reset owed between transactions")
	}
	if p.begin(0x100) {
		t.Error("an emitted transaction must not be emitted twice")
	}
	p.commitReceived()
	if !p.begin(0x128) {
		t.Error("the next transaction must be emitted")
	}
}

func TestProgressReset(t *testing.T) {
	p := newProgress(1)
	p.begin(10)
	p.open = true
	if !p.lost() {
		t.Fatal("a Reset is owed when the connection is lost inside an emitted transaction")
	}
	if p.inTx || p.open || p.lost() {
		t.Error("lost must clear the transaction state")
	}
	p.begin(0) // skipped
	if p.lost() {
		t.Error("no Reset for a skipped transaction")
	}
}

func TestProgressIdle(t *testing.T) {
	p := newProgress(0x100)
	if got := p.flush(0); got != 0x100 {
		t.Fatalf("before any ack the start is confirmed, got %s", got)
	}
	if !p.idle(0x200, 0) || p.flush(0) != 0x200 {
		t.Fatal("an idle keepalive must advance the confirmed position")
	}
	p.begin(0x300)
	if p.idle(0x400, 0) {
		t.Error("no idle advance inside a transaction")
	}
	p.open = true
	p.commitReceived()
	p.committed(0x328)
	if p.idle(0x500, 0x200) {
		t.Error("no idle advance while an emitted Commit is not acked")
	}
	if got := p.flush(0x328); got != 0x328 {
		t.Errorf("flush = %s, want the ack", got)
	}
	if !p.idle(0x500, 0x328) || p.flush(0x328) != 0x500 {
		t.Error("idle advance once everything emitted is acked")
	}
	if p.idle(0x480, 0x328) || p.flush(0) != 0x500 {
		t.Error("the confirmed position must never move back")
	}
}

func TestProgressMessages(t *testing.T) {
	p := newProgress(0x100)
	if p.message(false, 0x90) {
		t.Error("non-transactional message below start")
	}
	if !p.message(false, 0x110) {
		t.Fatal("non-transactional message above start")
	}
	p.messageEmitted(0x110)
	if p.message(false, 0x110) {
		t.Error("a non-transactional message must be emitted once")
	}
	if p.message(true, 0x120) {
		t.Error("a transactional message outside a transaction")
	}
}

func TestProgressWritePosition(t *testing.T) {
	p := newProgress(0x100)
	if got := p.write(p.flush(0)); got != 0x100 {
		t.Errorf("write = %s before anything was received", got)
	}
	p.receive(0x300)
	p.receive(0x200)
	if got := p.write(p.flush(0x180)); got != 0x300 {
		t.Errorf("write = %s, want the received 0/300", got)
	}
	if got := p.flush(0x180); got != 0x180 {
		t.Errorf("flush = %s, want the ack", got)
	}
	p.lost()
	if got := p.write(p.flush(0)); got != 0x180 {
		t.Errorf("after a loss write = %s, want the flush position", got)
	}
}

// TestIdleFor: with a Config.Idle hook the stream offers an idle WAL end to
// the consumer without confirming it itself.
func TestIdleFor(t *testing.T) {
	p := newProgress(100)
	if p.idleFor(100, 0) {
		t.Error("idleFor(100) offered the start position again")
	}
	if !p.idleFor(150, 0) {
		t.Error("idleFor(150) with nothing emitted was not offered")
	}
	if p.confirmed != 100 {
		t.Errorf("idleFor confirmed %s by itself, want 100 kept", p.confirmed)
	}
	p.begin(200)
	if p.idleFor(250, 0) {
		t.Error("idleFor offered a WAL end inside a transaction")
	}
	p.commitReceived()
	p.committed(300)
	if p.idleFor(350, 250) {
		t.Error("idleFor offered a WAL end while a Commit emitted is not acked")
	}
	if !p.idleFor(350, 300) {
		t.Error("idleFor(350) after every Commit was acked was not offered")
	}
	if p.idleFor(300, 300) {
		t.Error("idleFor offered a WAL end no higher than the ack")
	}
}
