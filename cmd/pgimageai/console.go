package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"

	"github.com/pgimageai/pgimageai/console"
)

// consoleSettings are the console's settings beside its command flags
// (queryFlags.Addr, AllowRetry): the address of run's console and the
// variable that holds the token.
type consoleSettings struct {
	Addr     string // run --console-addr; "" = no console
	TokenEnv string // the variable's name
	token    string // its value: never printed, never in an error
}

// consoleCommand serves the console until ctx ends.
func consoleCommand(ctx context.Context, c config, _, stderr io.Writer) error {
	if err := checkConsoleToken(c); err != nil {
		return err
	}
	if err := c.resolveSlot(ctx); err != nil {
		return err
	}
	return serveConsole(ctx, c, c.Query.Addr, c.logger(stderr))
}

// serveConsole listens on addr and serves the console of c's databases
// until ctx ends.
func serveConsole(ctx context.Context, c config, addr string, log *slog.Logger) error {
	srv, ln, closeDB, err := startConsole(ctx, c, addr, log)
	if err != nil {
		return err
	}
	defer closeDB()
	return srv.Run(ctx, ln)
}

// checkConsoleToken is the usage error of a console without a token long
// enough, before anything connects.
func checkConsoleToken(c config) error {
	if len(c.Console.token) < console.MinTokenLength {
		return fmt.Errorf("%w: the console needs a token of at least %d characters in the environment variable %s (--console-token-env names another)",
			errUsage, console.MinTokenLength, c.Console.TokenEnv)
	}
	return nil
}

// startConsole checks the token, listens on addr and connects: everything
// that can fail before the console serves, so that run reports it at once.
func startConsole(ctx context.Context, c config, addr string, log *slog.Logger) (*console.Server, net.Listener, func(), error) {
	if err := checkConsoleToken(c); err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: console address: %v", errUsage, err)
	}
	db, err := console.OpenDB(ctx, console.DBConfig{SourceDSN: c.DSN, TargetDSN: c.TargetDSN, Group: c.Group, Slot: c.Slot, AllowRetry: c.Query.AllowRetry})
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	srv, err := console.New(console.Config{Token: c.Console.token, AllowRetry: c.Query.AllowRetry, Logger: log}, db)
	if err != nil {
		ln.Close()
		db.Close()
		return nil, nil, nil, err
	}
	if err := checkLoopback(addr); err != nil {
		log.Warn("the console listens beyond this machine: put TLS in front of it", "addr", ln.Addr().String())
	}
	log.Info("console listening", "addr", ln.Addr().String(), "retry", c.Query.AllowRetry, "token_env", c.Console.TokenEnv)
	return srv, ln, db.Close, nil
}
