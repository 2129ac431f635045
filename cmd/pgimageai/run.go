package main

import (
	"context"
	"io"
	"os"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/openai"
)

// registry returns the providers this binary knows.
func registry() *provider.Registry {
	r := provider.NewRegistry()
	r.Register("openai", openai.Factory)
	return r
}

// runBridge streams until ctx ends (SIGINT/SIGTERM), then stops gracefully.
func runBridge(ctx context.Context, c config, _, stderr io.Writer) error {
	b := bridge.New(bridge.Config{
		SourceDSN:   c.DSN,
		TargetDSN:   c.TargetDSN,
		Slot:        c.Slot,
		Publication: c.Publication,
		Registry:    registry(),
		Env:         os.LookupEnv,
		ByteBudget:  c.ByteBudget,
		Logger:      c.logger(stderr),
	})
	return b.Run(ctx)
}
