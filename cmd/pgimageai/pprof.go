package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// checkLoopback accepts "" (off) or a host:port whose host is a loopback IP
// literal ("localhost" goes through the resolver, which need not say
// loopback): profiles show memory contents (goroutine stacks, heap sample
// sites) and cost CPU on demand, so they are never served beyond the
// machine.
func checkLoopback(addr string) error {
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address (use 127.0.0.1:PORT or [::1]:PORT)", addr)
	}
	return nil
}

// servePprof serves net/http/pprof's handlers on addr until ctx ends; the
// returned stop waits for it. addr was checked by checkLoopback.
func servePprof(ctx context.Context, addr string, log *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	// Not /debug/pprof/cmdline: the command line may hold a DSN's password.
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("pprof endpoint stopped", "err", err)
		}
	}()
	log.Info("pprof endpoint listening", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
