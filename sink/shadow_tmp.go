package sink

// TEMPORARY until the shadow SQL lands.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgimageai/pgimageai/catalog"
)

func ShadowName(live, version string) string { return live + "__v" + version[:8] }
func AddShadowColumn(ctx context.Context, conn *pgx.Conn, table *catalog.Table, shadow, sqlType string) error {
	return nil
}

type IndexPlan struct{}

func ShadowIndexes(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live, shadow string) ([]IndexPlan, error) {
	return nil, nil
}
func BuildShadowIndexes(ctx context.Context, conn *pgx.Conn, plans []IndexPlan) error { return nil }
func SwitchObstacles(ctx context.Context, conn *pgx.Conn, table *catalog.Table, live string) ([]string, error) {
	return nil, nil
}

type Switch struct {
	Table        *catalog.Table
	Live, Shadow string
	Indexes      []IndexPlan
	LockTimeout  time.Duration
}

func (o Switch) Queue(b *pgx.Batch) {}

const LockMillisSQL = ""

type DropShadow struct {
	Table       *catalog.Table
	Shadow      string
	LockTimeout time.Duration
}

func (o DropShadow) Queue(b *pgx.Batch) {}
