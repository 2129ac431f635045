package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
)

// fake is Deps over integer keys: source and target hold sorted keys; the
// target's values say which rows hold a result. Keys are {"id": N}.
type fake struct {
	source  []int
	nullImg map[int]bool
	openErr map[int]bool // keys with an open errors row
	target  map[int]bool // key → holds a result
	scopes  [][]int      // partitions' keys
	// insertOnRemove: keys that come back in the source between the page
	// read and the delete (a row inserted after its page was read).
	insertOnRemove []int
	maxPage        int // the largest page asked for
	queued         [][2]int
	removeErr      error
}

func key(n int) []byte { return []byte(fmt.Sprintf(`{"id": %d}`, n)) }

func id(k []byte) int {
	n, err := strconv.Atoi(string(k[len(`{"id": `) : len(k)-1]))
	if err != nil {
		panic(err)
	}
	return n
}

func page[T any](keys []int, after []byte, limit int, f func(int) T) []T {
	var out []T
	for _, k := range keys {
		if after != nil && k <= id(after) {
			continue
		}
		if len(out) == limit {
			break
		}
		out = append(out, f(k))
	}
	return out
}

func (f *fake) SourceKeys(_ context.Context, scope int, after []byte, limit int) ([]Key, error) {
	f.maxPage = max(f.maxPage, limit)
	keys := f.source
	if scope >= 0 {
		keys = f.scopes[scope]
	}
	return page(keys, after, limit, func(k int) Key { return Key{JSON: key(k), ImageNull: f.nullImg[k]} }), nil
}

func (f *fake) TargetKeys(_ context.Context, after, upTo []byte, limit int) ([]Key, error) {
	f.maxPage = max(f.maxPage, limit)
	var keys []int
	for k := range f.target {
		if upTo == nil || k <= id(upTo) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return page(keys, after, limit, func(k int) Key { return Key{JSON: key(k), Value: f.target[k]} }), nil
}

func (f *fake) InSource(_ context.Context, keys [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = slices.Contains(f.source, id(k))
	}
	return out, nil
}

func (f *fake) OpenErrors(_ context.Context, keys [][]byte) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = f.openErr[id(k)]
	}
	return out, nil
}

func (f *fake) Lacking(_ context.Context, keys []Key) ([]bool, error) {
	out := make([]bool, len(keys))
	for i, k := range keys {
		v, ok := f.target[id(k.JSON)]
		out[i] = !ok || !v && !k.ImageNull && !f.openErr[id(k.JSON)]
	}
	return out, nil
}

func (f *fake) Remove(ctx context.Context, keys [][]byte) (int64, error) {
	if f.removeErr != nil {
		return 0, f.removeErr
	}
	for _, k := range f.insertOnRemove {
		if !slices.Contains(f.source, k) {
			f.source = append(f.source, k)
			slices.Sort(f.source)
		}
	}
	in, _ := f.InSource(ctx, keys)
	var n int64
	for i, k := range keys {
		if !in[i] {
			delete(f.target, id(k))
			n++
		}
	}
	return n, nil
}

func (f *fake) Less(_ context.Context, a, b []byte) (bool, error) { return id(a) < id(b), nil }

func (f *fake) Queue(_ context.Context, first, last []byte) (string, error) {
	f.queued = append(f.queued, [2]int{id(first), id(last)})
	return "queued", nil
}

func ints(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

func holding(keys ...int) map[int]bool {
	m := map[int]bool{}
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func TestRun(t *testing.T) {
	tests := []struct {
		name        string
		f           *fake
		o           Options
		want        Report
		wantTarget  []int
		wantQueued  [][2]int
		wantErr     bool
		wantMaxPage int
	}{
		{
			name:       "in step: nothing to do",
			f:          &fake{source: ints(1, 10), target: holding(ints(1, 10)...)},
			o:          Options{Orphans: true, Missing: true, Page: 3},
			want:       Report{TargetRows: 10, SourceRows: 10},
			wantTarget: ints(1, 10),
		},
		{
			name:       "orphans across pages are removed",
			f:          &fake{source: []int{2, 4}, target: holding(1, 2, 3, 4, 5, 6, 7)},
			o:          Options{Orphans: true, Page: 2},
			want:       Report{TargetRows: 7, SourceRows: 2, Orphans: 5, Removed: 5},
			wantTarget: []int{2, 4},
		},
		{
			name:       "a row back in the source before the delete keeps its result",
			f:          &fake{source: []int{1}, target: holding(1, 2, 3), insertOnRemove: []int{3}},
			o:          Options{Orphans: true, Page: 10},
			want:       Report{TargetRows: 3, SourceRows: 1, Orphans: 2, Removed: 1},
			wantTarget: []int{1, 3},
		},
		{
			name:       "missing rows are queued once, from the first to the last",
			f:          &fake{source: ints(1, 9), target: holding(1, 2, 4, 5, 6, 8, 9)},
			o:          Options{Missing: true, Page: 2},
			want:       Report{TargetRows: 7, SourceRows: 9, Missing: 2, Queued: "queued"},
			wantTarget: []int{1, 2, 4, 5, 6, 8, 9},
			wantQueued: [][2]int{{3, 7}},
		},
		{
			name: "a NULL result counts as missing only for a non-NULL image",
			f: &fake{source: ints(1, 3), nullImg: map[int]bool{2: true},
				target: map[int]bool{1: true, 2: false, 3: false}},
			o:          Options{Missing: true, Page: 10},
			want:       Report{TargetRows: 3, SourceRows: 3, Missing: 1, Queued: "queued"},
			wantTarget: []int{1, 2, 3},
			wantQueued: [][2]int{{3, 3}},
		},
		{
			name: "a NULL result with an open errors row is not missing",
			f: &fake{source: ints(1, 2), openErr: map[int]bool{2: true},
				target: map[int]bool{1: true, 2: false}},
			o:          Options{Orphans: true, Missing: true, Page: 10},
			want:       Report{TargetRows: 2, SourceRows: 2},
			wantTarget: []int{1, 2},
		},
		{
			name:       "orphans before, between and after the source's keys, many in one gap",
			f:          &fake{source: []int{10, 20}, target: holding(1, 2, 10, 11, 12, 13, 14, 15, 20, 30, 31)},
			o:          Options{Orphans: true, Missing: true, Page: 2},
			want:       Report{TargetRows: 11, SourceRows: 2, Orphans: 9, Removed: 9},
			wantTarget: []int{10, 20},
		},
		{
			name:       "an empty source: every target row is an orphan",
			f:          &fake{target: holding(1, 2, 3)},
			o:          Options{Orphans: true, Missing: true, Page: 2},
			want:       Report{TargetRows: 3, Orphans: 3, Removed: 3},
			wantTarget: nil,
		},
		{
			name:       "orphans only: missing rows are not looked for",
			f:          &fake{source: ints(1, 4), target: holding(1, 5)},
			o:          Options{Orphans: true, Page: 3},
			want:       Report{TargetRows: 2, SourceRows: 4, Orphans: 1, Removed: 1},
			wantTarget: []int{1},
		},
		{
			name:       "dry run counts and changes nothing",
			f:          &fake{source: []int{1, 3}, target: holding(1, 2)},
			o:          Options{DryRun: true, Orphans: true, Missing: true, Page: 1},
			want:       Report{TargetRows: 2, SourceRows: 2, Orphans: 1, Missing: 1},
			wantTarget: []int{1, 2},
		},
		{
			name:       "partitions as scopes: the range spans them",
			f:          &fake{source: ints(1, 30), target: holding(ints(1, 10)...), scopes: [][]int{ints(21, 25), ints(11, 12)}},
			o:          Options{Missing: true, Scopes: 2, Page: 2},
			want:       Report{SourceRows: 7, Missing: 7, Queued: "queued"},
			wantTarget: ints(1, 10),
			wantQueued: [][2]int{{11, 25}},
		},
		{
			name:        "the default page bounds every read",
			f:           &fake{source: ints(1, 3), target: holding(ints(1, 3)...)},
			o:           Options{Orphans: true, Missing: true},
			want:        Report{TargetRows: 3, SourceRows: 3},
			wantTarget:  ints(1, 3),
			wantMaxPage: DefaultPage,
		},
		{
			name:       "a failed delete is returned",
			f:          &fake{source: nil, target: holding(1), removeErr: errors.New("boom")},
			o:          Options{Orphans: true, Page: 10},
			want:       Report{TargetRows: 1, Orphans: 1},
			wantTarget: []int{1},
			wantErr:    true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Run(context.Background(), tt.f, tt.o)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Run: err %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("report %+v, want %+v", got, tt.want)
			}
			var target []int
			for k := range tt.f.target {
				target = append(target, k)
			}
			slices.Sort(target)
			if !slices.Equal(target, tt.wantTarget) {
				t.Errorf("target %v, want %v", target, tt.wantTarget)
			}
			if !slices.Equal(tt.f.queued, tt.wantQueued) {
				t.Errorf("queued %v, want %v", tt.f.queued, tt.wantQueued)
			}
			if tt.wantMaxPage > 0 && tt.f.maxPage != tt.wantMaxPage {
				t.Errorf("largest page %d, want %d", tt.f.maxPage, tt.wantMaxPage)
			}
		})
	}
}

func TestReportString(t *testing.T) {
	r := Report{TargetRows: 6, SourceRows: 3, Orphans: 3, Removed: 3, Missing: 1, Queued: "queued"}
	want := "6 target rows and 3 source rows read; 3 results of rows no longer in the source (3 removed); 1 rows without a result (queued)"
	if got := r.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
