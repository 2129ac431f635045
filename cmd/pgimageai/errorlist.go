package main

import (
	"context"
	"io"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/render"
	"github.com/pgimageai/pgimageai/state"
)

// listErrors prints the open errors, newest first.
func listErrors(ctx context.Context, c config, stdout, _ io.Writer) error {
	target, err := connectTarget(ctx, c)
	if err != nil {
		return err
	}
	defer target.close(ctx)
	l, err := readErrors(ctx, target, c.Query)
	if err != nil {
		return err
	}
	return render.WriteErrors(stdout, l, c.Query.Format)
}

// readErrors reads the open errors that match q's filters, newest first, at
// most q.Limit of them (0 = all).
func readErrors(ctx context.Context, target *database, q queryFlags) (render.ErrorList, error) {
	l := render.ErrorList{Rule: q.Rule, Reason: q.Reason}
	var err error
	if l.Errors, l.Matching, err = state.OpenErrors(ctx, target.conn, q.Rule, q.Reason, q.Limit); err != nil {
		return render.ErrorList{}, target.explain("list open errors", err)
	}
	return l, nil
}
