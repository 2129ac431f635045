package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"time"

	"github.com/pgimageai/pgimageai/bridge"
	"github.com/pgimageai/pgimageai/metrics"
	"github.com/pgimageai/pgimageai/normalize"
	"github.com/pgimageai/pgimageai/provider"
	"github.com/pgimageai/pgimageai/provider/cohere"
	"github.com/pgimageai/pgimageai/provider/jina"
	"github.com/pgimageai/pgimageai/provider/llamacpp"
	"github.com/pgimageai/pgimageai/provider/local"
	"github.com/pgimageai/pgimageai/provider/openai"
	"github.com/pgimageai/pgimageai/provider/vllm"
	"github.com/pgimageai/pgimageai/provider/voyage"
)

// registry returns the providers this binary knows, their key variables
// allowed by keyEnv.
func registry(keyEnv *provider.KeyEnvPolicy) *provider.Registry {
	r := provider.NewRegistry()
	r.AllowKeyEnv(keyEnv)
	r.Register("openai", openai.Factory)
	r.Register("ollama", openai.OllamaFactory)
	r.Register("local", local.Factory)
	r.Register("vllm", vllm.Factory)
	r.Register("llamacpp", llamacpp.Factory)
	r.Register("voyage", voyage.Factory)
	r.Register("cohere", cohere.Factory)
	r.Register("jina", jina.Factory)
	return r
}

// memoryHeadroom is what the Go heap may hold beside the byte budget (which
// charges images in flight, the results waiting in lanes and per-call
// overheads): the result cache (16 MiB at most), decoded messages waiting in
// channels, and the runtime. The limit is soft: the collector works harder
// near it, so peak RSS stays within budget + 64 MiB.
const memoryHeadroom = 24 << 20

// runBridge streams until ctx ends (SIGINT/SIGTERM), then stops gracefully.
func runBridge(ctx context.Context, c config, _, stderr io.Writer) error {
	log := c.logger(stderr)
	normalize.OnBackendStart(func(backend string) { log.Info("image backend started", "images", backend) })
	if c.Console.Addr != "" {
		// A usage error, reported before anything listens or connects.
		if err := checkConsoleToken(c); err != nil {
			return err
		}
	}
	var m *metrics.Metrics
	if c.MetricsAddr != "" {
		// Listen before anything else: a taken port is a configuration
		// error, reported at once rather than after connecting.
		ln, err := net.Listen("tcp", c.MetricsAddr)
		if err != nil {
			return fmt.Errorf("%w: --metrics-addr: %v", errUsage, err)
		}
		m = metrics.New()
		if err := c.resolveSlot(ctx); err != nil {
			return err
		}
		slots := newSlotReader(c.DSN, c.Slot)
		defer slots.close()
		m.SetSlotSource(slots.read)
		srv := metrics.NewServer(m.Handler(), metrics.DefaultTimeouts)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics endpoint stopped", "err", err)
			}
		}()
		defer func() {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		log.Info("metrics endpoint listening", "addr", ln.Addr().String(), "paths", "/metrics /healthz /readyz /livez")
	}
	if c.PprofAddr != "" {
		stop, err := servePprof(ctx, c.PprofAddr, log)
		if err != nil {
			return fmt.Errorf("%w: --pprof-addr: %v", errUsage, err)
		}
		defer stop()
	}
	if err := c.resolveSlot(ctx); err != nil {
		return err
	}
	// The byte budget bounds live image bytes; a soft memory limit keeps the
	// garbage collector from letting the heap grow to twice that. An explicit
	// GOMEMLIMIT wins.
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(c.ByteBudget + memoryHeadroom)
	}
	if c.Console.Addr != "" {
		srv, ln, closeDB, err := startConsole(ctx, c, c.Console.Addr, log)
		if err != nil {
			return err
		}
		defer closeDB()
		cctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- srv.Run(cctx, ln) }()
		defer func() {
			stop()
			if err := <-done; err != nil {
				log.Error("console stopped", "err", err)
			}
		}()
	}
	b := bridge.New(bridge.Config{
		SourceDSN: c.DSN,
		TargetDSN: c.TargetDSN,
		Stream:    bridge.Stream{Slot: c.Slot, Group: c.Group, Publication: c.Publication},
		Providers: bridge.Providers{Registry: registry(c.KeyEnv), Env: os.LookupEnv},
		Limits:    bridge.Limits{ByteBudget: c.ByteBudget, ReadColumnsOnly: c.ReadColumns},
		Timing:    bridge.Timing{StallAfter: c.StallAfter, FailoverWait: c.FailoverWait, RevalidateInterval: c.Revalidate},
		Outage:    bridge.Outage{ProbeMax: c.ProbeMax},
		Logger:    log,
		Metrics:   m,
		Version:   versionName() + " (images: " + normalize.BackendSoFar() + ")", // the start-up line's
		Trust:     bridge.Trust{Tables: c.trustedTables()},
	})
	return b.Run(ctx)
}
