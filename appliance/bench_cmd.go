package appliance

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/attune-io/attune/appliance/bench"
	"github.com/attune-io/attune/appliance/config"
)

func newBenchCommand() *cobra.Command {
	var o bench.Options
	var embedded bool
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput, latency and FIFO/limit guarantees against a running (or --embedded) appliance",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			o.Progress = cmd.ErrOrStderr()
			asJSON, _ := cmd.Flags().GetBool("json")
			var api bench.API
			if embedded {
				app, stop, err := startEmbeddedForBench(ctx)
				if err != nil {
					return err
				}
				defer stop()
				api = NewClient(app.URL(), app.token)
				if cpuProfile != "" {
					f, err := os.Create(cpuProfile)
					if err != nil {
						return err
					}
					defer f.Close()
					if err := pprof.StartCPUProfile(f); err != nil {
						return err
					}
					defer pprof.StopCPUProfile()
				}
			} else {
				c, err := clientFromFlags(cmd.Flags())
				if err != nil {
					return err
				}
				api = c
			}
			r, err := bench.Run(ctx, api, o)
			if err != nil {
				return err
			}
			return printBench(cmd.OutOrStdout(), r, asJSON)
		},
	}
	fs := cmd.Flags()
	addClientFlags(fs)
	fs.StringVar(&cpuProfile, "cpuprofile", "", "with --embedded: write a CPU profile of the whole appliance during the run")
	fs.BoolVar(&embedded, "embedded", false, "boot a temporary appliance (embedded PostgreSQL + private RabbitMQ) and measure it")
	fs.IntVar(&o.Executions, "executions", 1000, "executions to request")
	fs.IntVar(&o.Concurrency, "concurrency", 5, "concurrency limit of the bench action (per group)")
	fs.IntVar(&o.Groups, "groups", 1, "number of group_by values (each its own FIFO queue)")
	fs.StringVar(&o.Action, "action", "core.noop", "action to copy (its schema is relaxed so the bench can group)")
	fs.IntVar(&o.Clients, "clients", 16, "concurrent HTTP requesters")
	fs.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "how long to wait for all executions to finish")
	return cmd
}

// startEmbeddedForBench boots a throwaway appliance in a temp data dir.
func startEmbeddedForBench(ctx context.Context) (*App, func(), error) {
	dir, err := os.MkdirTemp("", "attune-bench-")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load("", os.Environ(), map[string]any{"data_dir": filepath.Join(dir, "data"), "http.addr": "127.0.0.1:0", "log.level": "warn"})
	if err != nil {
		return nil, nil, err
	}
	log := NewLogger(os.Stderr, cfg.Log.Format, cfg.Log.Level)
	app, err := Start(ctx, cfg, log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, nil, err
	}
	return app, func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		app.Stop(stopCtx)
		_ = os.RemoveAll(dir)
	}, nil
}

func printBench(w io.Writer, r bench.Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(w, "executions:          %d (action %s, limit %d per group, %d groups)\n", r.Executions, r.Action, r.Concurrency, r.Groups)
	fmt.Fprintf(w, "seconds:             %.3f\n", r.Seconds)
	fmt.Fprintf(w, "exec/s:              %.1f\n", r.ExecPerSec)
	fmt.Fprintf(w, "dispatch latency ms: p50 %.2f  p95 %.2f  p99 %.2f (requested → running)\n", r.DispatchLatencyMs.P50, r.DispatchLatencyMs.P95, r.DispatchLatencyMs.P99)
	fmt.Fprintf(w, "e2e latency ms:      p50 %.2f  p95 %.2f  p99 %.2f (requested → finished)\n", r.E2ELatencyMs.P50, r.E2ELatencyMs.P95, r.E2ELatencyMs.P99)
	fmt.Fprintf(w, "fifo violations:     %d\n", r.FIFOViolations)
	fmt.Fprintf(w, "max active observed: %d (limit %d)\n", r.MaxActiveObserved, r.Concurrency)
	fmt.Fprintf(w, "lost:                %d   failed: %d\n", r.Lost, r.Failed)
	return nil
}
