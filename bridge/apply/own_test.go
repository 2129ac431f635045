package apply

import "testing"

func TestWiden(t *testing.T) {
	const epoch = 1 << 32
	tests := []struct {
		name string
		ref  uint64
		xid  uint32
		want uint64
	}{
		{name: "same epoch", ref: 5*epoch + 1000, xid: 1200, want: 5*epoch + 1200},
		{name: "a little behind", ref: 5*epoch + 1000, xid: 900, want: 5*epoch + 900},
		{name: "across the epoch, ahead", ref: 5*epoch + 0xfffffff0, xid: 5, want: 6*epoch + 5},
		{name: "across the epoch, behind", ref: 6*epoch + 5, xid: 0xfffffff0, want: 5*epoch + 0xfffffff0},
		{name: "epoch 0 stays non-negative", ref: 10, xid: 0xfffffff0, want: 0xfffffff0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := widen(tt.ref, tt.xid); got != tt.want {
				t.Fatalf("widen(%#x, %#x) = %#x, want %#x", tt.ref, tt.xid, got, tt.want)
			}
		})
	}
}

// TestOwnAcrossAnEpoch: an own transaction is recognised across the XID
// epoch boundary, and an unrelated transaction whose 32-bit XID repeats an
// own one's, 2^32 transactions later, is not taken for it.
func TestOwnAcrossAnEpoch(t *testing.T) {
	const epoch = 1 << 32
	o := NewOwn([]uint64{7}, 0xfffffff0) // stored by an earlier run: epoch 0, XID 7
	o.Add(epoch + 3)                     // written this run, in epoch 1
	if o.Take(0xfffffff5) {              // an unrelated transaction at the end of epoch 0
		t.Fatal("an unrelated transaction taken for an own one")
	}
	if !o.Take(3) { // epoch 1, XID 3: the own one
		t.Fatal("the own transaction of epoch 1 not recognised")
	}
	if o.Take(3) {
		t.Fatal("an own transaction taken twice")
	}
	// The stream moves on by almost an epoch; XID 7 comes round again: that
	// is epoch 1's XID 7, not the own one of epoch 0.
	for x := uint64(1 << 20); x < epoch; x += 1 << 30 {
		o.Take(uint32(epoch + x))
	}
	if o.Take(7) {
		t.Fatal("epoch 1's XID 7 taken for epoch 0's own transaction")
	}
}
