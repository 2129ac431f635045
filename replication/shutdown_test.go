package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// fakeServer speaks just enough of the PostgreSQL protocol for emit: it
// accepts a replication connection (and decodes its standby status updates)
// and answers plain connections, the probes, either normally or, once
// stopping is set, with FATAL 57P03 like a server in shutdown.
type fakeServer struct {
	ln       net.Listener
	stopping atomic.Bool
	probes   atomic.Int32
	updates  atomic.Int32 // CopyData messages (status updates) received

	mu       sync.Mutex
	statuses []standbyStatus // the standby status updates received, in order
	bad      []string        // CopyData that was not a well-formed status update
}

// standbyStatus is one decoded standby status update ('r'): the positions
// the client reports written, flushed and applied, and whether it asked for
// a reply.
type standbyStatus struct {
	Write, Flush, Apply LSN
	ReplyRequested      bool
}

// parseStandbyStatus decodes a standby status update as the walsender does
// (ProcessStandbyReplyMessage): 'r', three int64 positions, the client's
// clock (int64), the reply flag (one byte).
func parseStandbyStatus(data []byte) (standbyStatus, error) {
	if len(data) != 34 || data[0] != 'r' {
		return standbyStatus{}, fmt.Errorf("not a standby status update: %d bytes, type %q", len(data), data[:min(1, len(data))])
	}
	return standbyStatus{
		Write:          LSN(binary.BigEndian.Uint64(data[1:])),
		Flush:          LSN(binary.BigEndian.Uint64(data[9:])),
		Apply:          LSN(binary.BigEndian.Uint64(data[17:])),
		ReplyRequested: data[33] != 0,
	}, nil
}

// received returns the status updates decoded so far, and fails t when any
// CopyData was not one.
func (f *fakeServer) received(t testing.TB) []standbyStatus {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.bad {
		t.Errorf("the client sent %s", b)
	}
	return append([]standbyStatus(nil), f.statuses...)
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakeServer) dsn() string {
	return fmt.Sprintf("postgres://u@%s/db?sslmode=disable", f.ln.Addr())
}

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	be := pgproto3.NewBackend(c, c)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	sm, ok := msg.(*pgproto3.StartupMessage)
	if !ok {
		return
	}
	replication := sm.Parameters["replication"] != ""
	if !replication {
		f.probes.Add(1)
		if f.stopping.Load() {
			be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P03",
				Message: "das Datenbanksystem fährt herunter"}) // translated: only the code counts
			be.Flush()
			return
		}
	}
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
	if be.Flush() != nil {
		return
	}
	for {
		msg, err := be.Receive()
		if err != nil {
			return
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			st, err := parseStandbyStatus(m.Data)
			f.mu.Lock()
			if err != nil {
				f.bad = append(f.bad, err.Error())
			} else {
				f.statuses = append(f.statuses, st)
			}
			f.mu.Unlock()
			f.updates.Add(1)
		case *pgproto3.Terminate:
			return
		}
	}
}

// blockedSession returns a session streaming from f whose consumer reads
// nothing: out has no buffer and no reader unless the test adds one.
func blockedSession(t *testing.T, f *fakeServer, interval time.Duration, out chan Event) *session {
	t.Helper()
	conn, err := pgconn.Connect(t.Context(), f.dsn()+"&replication=database")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	s := NewStream(Config{ConnString: f.dsn(), Slot: "s", Publication: "p", StatusInterval: interval})
	return &session{s: s, p: newProgress(0x100), out: out, log: slog.New(slog.DiscardHandler), conn: conn}
}

func TestEmitBlockedServerStopping(t *testing.T) {
	tests := []struct {
		name       string
		stopping   bool          // the server refuses connections with 57P03
		readAfter  time.Duration // a consumer takes the event after this; 0 = never
		wantErr    error
		wantProbes bool
	}{
		{"consumer stuck, server shutting down", true, 0, errServerStopping, true},
		{"consumer stuck, server up", false, 0, context.DeadlineExceeded, true},
		{"consumer catches up before a probe", true, 50 * time.Millisecond, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeServer(t)
			f.stopping.Store(tt.stopping)
			out := make(chan Event)
			ss := blockedSession(t, f, 100*time.Millisecond, out)
			ss.lastStatus = time.Now()
			if tt.readAfter > 0 {
				go func() {
					time.Sleep(tt.readAfter)
					<-out
				}()
			}
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			err := ss.emit(ctx, Begin{FinalLSN: 0x200})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("emit = %v, want %v", err, tt.wantErr)
			}
			if got := f.probes.Load() > 0; got != tt.wantProbes {
				t.Errorf("%d probes, want some: %t", f.probes.Load(), tt.wantProbes)
			}
			if tt.wantErr != nil && f.updates.Load() == 0 {
				t.Error("no status update while blocked")
			}
			// What a blocked consumer lets the client confirm: the start,
			// nothing of the transaction it could not take.
			for _, st := range f.received(t) {
				if st.Flush != 0x100 || st.Apply != 0x100 || st.Write < st.Flush {
					t.Errorf("status update %+v while blocked, want flush = apply = 0/100, write ≥ flush", st)
				}
			}
		})
	}
}

func TestRefusedStopping(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"shutting down (or starting up)", pgErr("57P03"), true},
		{"too many connections", pgErr("53300"), false},
		{"admin shutdown of the backend", pgErr("57P01"), false},
		{"refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := refusedStopping(tt.err); got != tt.want {
				t.Errorf("refusedStopping(%v) = %t, want %t", tt.err, got, tt.want)
			}
		})
	}
}

func TestProbeStopping(t *testing.T) {
	f := newFakeServer(t)
	s := NewStream(Config{ConnString: f.dsn(), StatusInterval: 100 * time.Millisecond})
	if s.probeStopping(t.Context()) {
		t.Error("a server that accepts connections reported as stopping")
	}
	f.stopping.Store(true)
	if !s.probeStopping(t.Context()) {
		t.Error("a server refusing with 57P03 not reported as stopping")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	s = NewStream(Config{ConnString: "postgres://u@" + addr + "/db?sslmode=disable"})
	if s.probeStopping(t.Context()) {
		t.Error("a refused TCP connection reported as stopping")
	}
}
