package console

import (
	"context"
	"errors"
	"time"

	"github.com/pgimageai/pgimageai/functions"
	"github.com/pgimageai/pgimageai/replication"
	"github.com/pgimageai/pgimageai/state"
)

// Source is what the pages read and the one thing they may ask: DB is the
// real one; the tests use a fake with function fields.
type Source interface {
	Overview(ctx context.Context) (Overview, error)
	// Results reads a page of rule's results, newest (greatest key) first.
	Results(ctx context.Context, rule string, q ResultQuery) (ResultPage, error)
	// Similar returns the nearest neighbours of the row keyed key by rule's
	// pgvector column; ErrNoSimilar when the column is not pgvector.
	Similar(ctx context.Context, rule, key string, n int) ([]Result, error)
	// Errors reads the open errors, newest first.
	Errors(ctx context.Context, rule, reason string, limit int) ([]state.ConsoleError, int64, error)
	// Image reads the image of rule's source row keyed key (source_key
	// JSON), at most max bytes of it; see ImageRead.
	Image(ctx context.Context, rule, key string, have func(sum [32]byte) bool) (ImageRead, error)
	// ErrorCounts counts the open errors by rule and reason.
	ErrorCounts(ctx context.Context) ([]state.ErrorCount, error)
	// CallsToday returns each rule's calls of the UTC day, for the
	// rows-per-minute chart.
	CallsToday(ctx context.Context) (map[string]int64, error)
	// CountRetryable counts the open errors a retry would reprocess.
	CountRetryable(ctx context.Context, req RetryRequest) (int64, error)
	// Retry writes the retry request, as `pgimageai retry` does.
	Retry(ctx context.Context, req RetryRequest) (replication.LSN, error)
}

// RetryRequest is what a retry asks for: the open errors of Rule with
// Reason ("" = every rule, every reason but invalid_rule), or, with Key, the
// one source row of Rule keyed Key (source_key JSON).
type RetryRequest struct {
	Rule   string
	Reason functions.Reason
	Key    string
}

// ErrNoSimilar: the rule's column is not a pgvector column, so the console
// has no distance to order its rows by.
var ErrNoSimilar = errors.New("similar images need an AI_IMAGE_EMBED rule whose target column is pgvector's vector(n)")

// ErrNoImage: the row, its image or the permission to read it is missing.
var ErrNoImage = errors.New("no image to show")

// ImageRead is a source row's image as the thumbnailer needs it: its
// content hash always, and its bytes only when the caller's have did not
// know the hash (a cached thumbnail never transfers the image).
type ImageRead struct {
	Sum   [32]byte
	Bytes []byte // nil when have knew Sum
	Size  int64
}

// Overview is what the overview page shows.
type Overview struct {
	At        time.Time
	Slot      SlotView
	Groups    []GroupView
	Rules     []RuleView
	Models    []state.ModelPace
	Errors    []state.ErrorCount
	Budgets   []Budget
	Backfills []state.BackfillRow
	Switches  []state.SwitchProgress
}

// SlotView is the slot of the console's group.
type SlotView struct {
	Name, WALStatus     string
	Found, Active       bool
	LagBytes, Retained  int64
	SafeWALSize         *int64
	ConfirmedLSN, AtLSN replication.LSN
	ServerVersion       int
}

// GroupView is a rule group, its slot and who leads it.
type GroupView struct {
	Group, Slot    string
	Rules, Enabled int64
	Leader         string // "" when no pgimageai run holds the leader lock
}

// RuleView is a rule as the overview lists it.
type RuleView struct {
	state.RuleListing
	State      string // valid, invalid or disabled
	LagBytes   int64
	LagSeconds float64
	Calls      []float64 // calls per minute over the last hour, oldest first (filled by the Server)
	OpenErrors int64     // (filled by the Server)
}

// Budget is a model's spend of the day against its cap.
type Budget struct {
	Model               string
	Calls, Tokens       int64
	MaxCalls, MaxTokens int64   // 0: no cap
	Cost                float64 // in the model's price unit; 0 when it has no prices
	Priced              bool
}

// ResultQuery selects a page of results: rows before the key Before
// (source_key JSON; "" for the newest), or the row whose key is Key.
type ResultQuery struct {
	Before string
	Key    string
	Limit  int
}

// ResultPage is a page of a rule's results.
type ResultPage struct {
	Rule    state.RuleListing
	Embed   bool
	Vector  bool // the target column is pgvector's: similar images can be asked
	Results []Result
	Next    string // the Before of the next page; "" on the last
	// Denied: the console's role may not read the target table (SQLSTATE
	// 42501); the page says so instead of failing.
	Denied bool
}

// Result is one target row: its key and what the model said (a caption,
// or a vector's dimension and norm).
type Result struct {
	Key      string // source_key JSON, e.g. {"id": 42}
	Caption  *string
	Dim      int
	Norm     float64
	Distance float64 // for similar images: cosine distance to the row asked about
}
