package render

import (
	"fmt"

	"github.com/pgimageai/pgimageai/replication"
)

// RetryText says what retry asked for.
func RetryText(n int64, lsn replication.LSN) string {
	if n == 1 {
		return fmt.Sprintf("1 open error matches; the running bridge will reprocess it at WAL position %s", lsn)
	}
	return fmt.Sprintf("%d open errors match; the running bridge will reprocess them at WAL position %s", n, lsn)
}
