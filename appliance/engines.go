package appliance

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/attune-io/attune/appliance/buildinfo"
	"github.com/attune-io/attune/appliance/config"
	"github.com/attune-io/attune/broker"
	"github.com/attune-io/attune/engine/executor"
	"github.com/attune-io/attune/engine/packs"
	"github.com/attune-io/attune/engine/worker"
	"github.com/attune-io/attune/web"
)

// startEngines starts the engines of the configured roles. The Service (the
// API's way into the executor) exists in every role: it only writes rows
// and publishes.
func (a *App) startEngines(ctx context.Context) error {
	cfg := a.cfg
	a.metrics = a.newMetrics()
	a.pub = broker.NewPublisher(a.conn)
	a.onStop("publisher", func(context.Context) error { return a.pub.Close() })
	a.svc = executor.NewService(a.store, a.pub, a.log.With("part", "executor"), cfg.Executor.Queue.MaxQueueLength)
	if cfg.HasRole(config.RoleAPI) || cfg.HasRole(config.RoleExecutor) {
		if err := a.registerPacks(ctx); err != nil {
			return err
		}
	}
	if cfg.HasRole(config.RoleWorker) {
		wcfg := WorkerConfig(cfg)
		if wcfg.ID == "" {
			// A stable id across restarts: the worker reuses its durable queue
			// and settles what its previous process left running.
			id, err := worker.LoadOrCreateID(filepath.Join(cfg.DataDir, "worker.id"))
			if err != nil {
				return err
			}
			wcfg.ID = id
		}
		wcfg.Observer = a.metrics
		a.work = worker.New(wcfg, a.store, a.conn, a.pub, a.log.With("part", "worker"))
		if err := a.work.Start(ctx); err != nil {
			return err
		}
		a.onStop("worker", func(ctx context.Context) error { a.work.Stop(ctx); return nil })
	}
	// The executor starts after the worker so that it stops before it: while
	// the worker drains on shutdown, the executions its finishes promote wait
	// in the durable requests queue for the next start, instead of being
	// failed by this process's executor for want of an eligible worker.
	if cfg.HasRole(config.RoleExecutor) {
		a.exec = executor.New(ExecutorConfig(cfg), a.svc, a.conn, a.log.With("part", "executor"))
		a.exec.Start(ctx)
		a.onStop("executor", func(context.Context) error { a.exec.Stop(); return nil })
	}
	return nil
}

// newMetrics builds the /metrics registry. The cluster-wide gauges (read
// from the database) come from processes with the api or executor role; a
// worker-only process exports its own counters and histograms.
func (a *App) newMetrics() *web.Metrics {
	mc := web.MetricsConfig{Logger: a.log.With("part", "metrics")}
	if a.cfg.HasRole(config.RoleAPI) || a.cfg.HasRole(config.RoleExecutor) {
		mc.Source = a.store
	}
	return web.NewMetrics(mc)
}

// ExecutorConfig maps the config table onto the executor's settings. The
// recovery loops run at least once per heartbeat interval (and at most every
// 5 s), so a dead worker is noticed about 3 heartbeats after its last one.
func ExecutorConfig(cfg config.Config) executor.Config {
	heartbeat := config.Seconds(cfg.Worker.HeartbeatIntervalSeconds)
	redrive := config.Seconds(cfg.Executor.RedriveAfterSeconds)
	return executor.Config{
		NoWorkerWait:      config.Seconds(cfg.Executor.NoWorkerWaitSeconds),
		HeartbeatInterval: heartbeat,
		RedriveAfter:      redrive,
		ScheduledTimeout:  config.Seconds(float64(cfg.Executor.ScheduledTimeoutSeconds)),
		QueueTimeout:      config.Seconds(float64(cfg.Executor.Queue.QueueTimeoutSeconds)),
		LoopInterval:      max(min(redrive/2, heartbeat, 5*time.Second), 50*time.Millisecond),
	}
}

// WorkerConfig maps the config table onto the worker engine's settings.
func WorkerConfig(cfg config.Config) worker.Config {
	return worker.Config{
		ID:                cfg.Worker.ID,
		Capacity:          cfg.Worker.Capacity,
		HeartbeatInterval: config.Seconds(cfg.Worker.HeartbeatIntervalSeconds),
		ShutdownTimeout:   config.Seconds(cfg.Worker.ShutdownTimeoutSeconds),
		KillGrace:         config.Seconds(cfg.Worker.KillGraceSeconds),
		QueueTTL:          config.Seconds(float64(cfg.Broker.WorkerQueueTTLms) / 1000),
		Version:           buildinfo.Version,
	}
}

// registerPacks registers the built-in core pack and every pack found under
// <data-dir>/packs and the configured pack dirs.
func (a *App) registerPacks(ctx context.Context) error {
	all := []packs.Pack{packs.Core()}
	for _, dir := range append([]string{filepath.Join(a.cfg.DataDir, "packs")}, a.cfg.Packs.Dirs...) {
		found, err := packs.LoadDir(dir)
		if err != nil {
			return fmt.Errorf("packs in %s: %w", dir, err)
		}
		all = append(all, found...)
	}
	for _, p := range all {
		if err := a.store.UpsertPack(ctx, p.Pack); err != nil {
			return fmt.Errorf("register pack %s: %w", p.Pack.Ref, err)
		}
		for _, act := range p.Actions {
			// Built-in actions have no YAML to hold a policy: keep the one an
			// operator set through the API instead of resetting it each start.
			if p.Pack.Ref == packs.CorePack {
				if old, err := a.store.GetAction(ctx, act.Ref); err == nil {
					act.Policy = old.Policy
				}
			}
			if _, err := a.svc.RegisterAction(ctx, act); err != nil {
				return fmt.Errorf("register action %s: %w", act.Ref, err)
			}
		}
		a.log.Info("registered pack", "pack", p.Pack.Ref, "actions", len(p.Actions))
	}
	return nil
}
