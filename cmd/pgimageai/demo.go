package main

import (
	"context"
	"io"

	"github.com/pgimageai/pgimageai/cmd/pgimageai/internal/demo"
)

// demoCommand runs `pgimageai demo` (package demo). The settings of c other
// than the log format, the byte budget and the key variables' policy do not
// apply: the demo brings its own database.
func demoCommand(ctx context.Context, c config, stdout, stderr io.Writer) error {
	return demo.Run(ctx, demo.Config{LogFormat: c.LogFormat, ByteBudget: c.ByteBudget, Registry: registry(c.KeyEnv)}, stdout, stderr)
}
