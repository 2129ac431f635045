package value

import (
	"testing"
)

func TestLSN(t *testing.T) {
	tests := []struct {
		text    string
		want    LSN
		wantErr bool
	}{
		{"0/0", 0, false},
		{"16/B374D848", 0x16B374D848, false},
		{"FFFFFFFF/FFFFFFFF", ^LSN(0), false},
		{"1/", 0, true},
		{"xyz", 0, true},
		{"100000000/0", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			got, err := ParseLSN(tt.text)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseLSN(%q) error = %v, want error %v", tt.text, err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if got != tt.want {
				t.Fatalf("ParseLSN(%q) = %d, want %d", tt.text, got, tt.want)
			}
			if got.String() != tt.text {
				t.Fatalf("String() = %q, want %q", got.String(), tt.text)
			}
			var scanned LSN
			for _, src := range []any{tt.text, []byte(tt.text), uint64(tt.want)} {
				if err := scanned.Scan(src); err != nil || scanned != tt.want {
					t.Fatalf("Scan(%T) = %d, %v; want %d", src, scanned, err, tt.want)
				}
			}
			if v, err := got.Value(); err != nil || v != tt.text {
				t.Fatalf("Value() = %v, %v; want %q", v, err, tt.text)
			}
		})
	}
	var l LSN
	if err := l.Scan(3.5); err == nil {
		t.Fatal("Scan(float64) succeeded")
	}
}

func TestPosition(t *testing.T) {
	tests := []struct {
		p, q Position
		less bool
	}{
		{Position{1, 0}, Position{2, 0}, true},
		{Position{2, 0}, Position{1, 9}, false},
		{Position{1, 1}, Position{1, 2}, true},
		{Position{1, 2}, Position{1, 2}, false},
		{Position{1, 3}, Position{1, 2}, false},
	}
	for _, tt := range tests {
		if got := tt.p.Less(tt.q); got != tt.less {
			t.Errorf("%v.Less(%v) = %v, want %v", tt.p, tt.q, got, tt.less)
		}
	}
	if !(Position{}).IsZero() || (Position{Ord: 1}).IsZero() {
		t.Error("IsZero wrong")
	}
	if got := (Position{Commit: 0x100000002, Ord: 3}).String(); got != "1/2#3" {
		t.Errorf("String() = %q", got)
	}
}
