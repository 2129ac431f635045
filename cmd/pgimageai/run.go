package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// registry returns the providers this binary knows.
func registry() *provider.Registry {
	r := provider.NewRegistry()
	r.Register("openai", openai.Factory)
	r.Register("local", local.Factory)
	r.Register("vllm", vllm.Factory)
	r.Register("llamacpp", llamacpp.Factory)
	r.Register("voyage", voyage.Factory)
	r.Register("cohere", cohere.Factory)
	r.Register("jina", jina.Factory)
	return r
}

// memoryHeadroom is what the process needs beside the images in flight:
// request bodies (base64 and JSON copies of the images being sent), decoded
// messages waiting in channels, and the runtime.
const memoryHeadroom = 96 << 20

// runBridge streams until ctx ends (SIGINT/SIGTERM), then stops gracefully.
func runBridge(ctx context.Context, c config, _, stderr io.Writer) error {
	if c.MetricsAddr != "" {
		// Refused rather than ignored: a user who asks for metrics must not
		// believe they are served.
		return fmt.Errorf("%w: --metrics-addr / PGIMAGEAI_METRICS_ADDR: the metrics endpoint is not available in this version", errUsage)
	}
	// The byte budget bounds live image bytes; a soft memory limit keeps the
	// garbage collector from letting the heap grow to twice that. An explicit
	// GOMEMLIMIT wins.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(c.ByteBudget + memoryHeadroom)
	}
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
