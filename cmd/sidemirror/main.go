// Command sidemirror is the sidemirror daemon, run next to every broker of a
// destination Kafka cluster:
//
//	sidemirror run --config /etc/sidemirror/sidecar.properties
//	sidemirror state dump --config /etc/sidemirror/sidecar.properties
//	sidemirror version
//
// It stays thin: load and validate the configuration, build the logger, and
// run the sidecar until SIGINT or SIGTERM. Exit codes: 0 after a clean
// shutdown, 1 after a runtime error, 2 for a bad configuration or usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/sidemirror/sidemirror/sidecar"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2 // also a bad configuration
)

func main() {
	os.Exit(run(os.Args, os.Stdout, os.Stderr))
}

// exitError carries the exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// run executes the command line and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	app := &cli.App{
		Name:            "sidemirror",
		Usage:           "Kafka cluster mirroring sidecar for stock Apache Kafka brokers",
		Writer:          stdout,
		ErrWriter:       stderr,
		HideHelpCommand: true,
		ExitErrHandler:  func(*cli.Context, error) {}, // run prints and exits
		Commands: []*cli.Command{
			{
				Name:  "run",
				Usage: "run the sidecar until SIGINT or SIGTERM",
				Flags: []cli.Flag{&cli.StringFlag{
					Name:     "config",
					Aliases:  []string{"c"},
					Usage:    "sidecar properties `FILE`",
					Required: true,
				}},
				Action: func(c *cli.Context) error { return runSidecar(c.String("config")) },
			},
			{
				Name:  "state",
				Usage: "inspect the " + sidecar.StateTopic + " topic",
				Subcommands: []*cli.Command{{
					Name:  "dump",
					Usage: "print every record of " + sidecar.StateTopic + " as a JSON line",
					Flags: []cli.Flag{&cli.StringFlag{
						Name:     "config",
						Aliases:  []string{"c"},
						Usage:    "sidecar properties `FILE` (its destination.* settings reach the cluster)",
						Required: true,
					}},
					Action: func(c *cli.Context) error { return dumpState(c.String("config"), c.App.Writer) },
				}},
			},
			{
				Name:  "version",
				Usage: "print the version",
				Action: func(c *cli.Context) error {
					fmt.Fprintf(c.App.Writer, "sidemirror %s (commit %s)\n", sidecar.Version, sidecar.Commit)
					return nil
				},
			},
		},
	}
	err := app.Run(args)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "sidemirror: %v\n", err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUsage // errors of urfave/cli itself: flags, commands
}

// runSidecar loads the configuration, then runs the sidecar until a signal.
func runSidecar(path string) error {
	cfg, err := sidecar.LoadConfig(path)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	log, err := sidecar.NewLogger(cfg)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	defer log.Sync() //nolint:errcheck // stderr may not support sync

	log.Info("starting sidemirror",
		zap.String("version", sidecar.Version),
		zap.String("commit", sidecar.Commit),
		zap.Int("pid", os.Getpid()),
		zap.Object("config", cfg))
	cores, by := sidecar.ApplyCPUCores(cfg)
	log.Info("running Go code on at most this many cores at once", zap.Int("cores", cores), zap.String("set-by", by))
	limit, by := sidecar.ApplyMemoryLimit(cfg)
	log.Info("the Go runtime collects garbage more often near this soft memory limit", zap.Int64("bytes", limit), zap.String("set-by", by))

	sc, err := sidecar.New(cfg, log)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := sc.Run(ctx); err != nil {
		log.Error("sidemirror stopped with an error", zap.Error(err))
		return &exitError{runExitCode(err), err}
	}
	log.Info("sidemirror stopped")
	return nil
}

// runExitCode is the exit code of an error of Sidecar.Run: a configuration
// error found while starting (a key or trust store file that cannot be read
// or holds no usable certificate, say) is a bad configuration, exit code 2
// like every other, which service managers do not restart; anything else
// is a runtime error.
func runExitCode(err error) int {
	if errors.Is(err, sidecar.ErrInvalidConfig) {
		return exitUsage
	}
	return exitRuntime
}

// dumpState prints __mirror_state as JSON lines.
func dumpState(path string, stdout io.Writer) error {
	cfg, err := sidecar.LoadConfig(path)
	if err != nil {
		return &exitError{exitUsage, err}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := sidecar.DumpState(ctx, cfg, stdout); err != nil {
		return &exitError{runExitCode(err), err}
	}
	return nil
}
