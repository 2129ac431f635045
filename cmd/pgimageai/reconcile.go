package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/pgimageai/pgimageai/bridge/reconcile"
)

// reconcileCommand compares the rules' sources and targets and repairs the
// drift (bridge/reconcile): the wiring of its flags, and its output.
func reconcileCommand(ctx context.Context, c config, stdout, _ io.Writer) error {
	source, target, closeAll, err := connectBoth(ctx, c)
	if err != nil {
		return err
	}
	defer closeAll()
	out, err := reconcile.Rules(ctx, source.conn, target.conn, reconcile.Config{
		Registry: registry(c.KeyEnv), Env: os.LookupEnv, Group: c.Group, Rule: c.Query.Rule, DryRun: c.Query.DryRun,
		Trusted: c.trustedTables(),
	})
	for _, o := range out {
		fmt.Fprintln(stdout, o.String(c.Query.DryRun))
	}
	switch {
	case errors.Is(err, reconcile.ErrNoRule) || errors.Is(err, reconcile.ErrInvalidRule):
		return fmt.Errorf("%w: %w", errUsage, err)
	case err != nil:
		return target.explain("reconcile", err)
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no enabled rules: nothing to reconcile")
	}
	return nil
}
