package work

import "github.com/pgimageai/pgimageai/functions"

// Call is one function call in flight. Done is closed once Result and Err
// are set; the fields are written only before that, by the goroutine that
// runs the call, and read only after it.
type Call struct {
	Done   chan struct{}
	Result functions.Result
	Err    error
	Hit    bool   // served by the cache or an identical call in flight
	Size   int    // image length, for errors rows found after the call
	Head   []byte // first bytes of the image
	Held   int64  // budget bytes its item is charged, from emit until written
	Key    *Key   // the call's identity; nil when no provider was asked
	// Unchanged: the stored result was computed from the same input; no
	// call was made and nothing is written.
	Unchanged bool
}

// NewCall returns a call not yet done, of an image of size bytes whose
// first bytes are head.
func NewCall(size int, head []byte) *Call {
	return &Call{Done: make(chan struct{}), Size: size, Head: head}
}

// Failed returns a call that failed before any provider was asked.
func Failed(err error, size int, head []byte) *Call {
	c := &Call{Done: make(chan struct{}), Result: functions.Result{Null: true}, Err: err, Size: size, Head: head}
	close(c.Done)
	return c
}

// Ready reports whether the call has finished.
func (c *Call) Ready() bool {
	select {
	case <-c.Done:
		return true
	default:
		return false
	}
}

// Follow waits for p, the call that c follows (an earlier change of the
// same row with the same input, still waiting in its lane), and takes its
// outcome when it succeeded: Follow reports false when p failed, and c is
// then to be made as any other call.
func (c *Call) Follow(p *Call) bool {
	<-p.Done
	if p.Err != nil {
		return false
	}
	c.Result, c.Unchanged, c.Hit = p.Result, p.Unchanged, true
	return true
}
