package phase

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/journal"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
)

// DefaultTerminationLog is where Kubernetes reads a container's result.
const DefaultTerminationLog = "/dev/termination-log"

// Upgrade runs `chart-upgrader upgrade`: for each chart of the spec (or the
// one --target), resolve → preflight → merge → apply → wait → verify. It
// holds the host lock throughout (busy → outcome.ErrLockHeld). A re-run
// after success makes no write to the cluster and returns nil.
func Upgrade(ctx context.Context, opts Options) error {
	return runCharts(ctx, opts, upgradePhases(), "upgraded")
}

// Preflight runs resolve and preflight only: it makes no writes.
func Preflight(ctx context.Context, opts Options) error {
	return runCharts(ctx, opts, preflightPhases(), "preflight passed for")
}

func runCharts(ctx context.Context, opts Options, phases []Phase, verb string) (err error) {
	opts.defaults()
	defer func() { writeTermination(opts, verb, err) }()
	charts, specFile, err := planCharts(opts)
	if err != nil {
		return err
	}
	if opts.HooksDir == "" && opts.SpecFile == "" && opts.Target == "" {
		// run by system-upgrade-controller: hooks travel with the spec
		opts.HooksDir = filepath.Dir(specFile)
	}
	if opts.HookTimeout <= 0 {
		opts.HookTimeout = DefaultHookTimeout
	}
	sess, err := openSession(ctx, &opts)
	if err != nil {
		return err
	}
	defer sess.close()
	var done []string
	for _, c := range charts {
		s, err := sess.state(&opts, c)
		if err != nil {
			return err
		}
		err = run(ctx, s, phases)
		s.close()
		if err != nil {
			return err
		}
		for _, h := range s.hookFailures {
			fmt.Fprintf(opts.Out, "warning: %s\n", h)
		}
		line := fmt.Sprintf("%s %s %s → %s", verb, s.Ref(), s.From, s.To)
		if s.Situation == SituationDone && !s.Leader && len(phases) > 2 {
			line = fmt.Sprintf("%s is at %s and ready: nothing to do", s.Ref(), s.To)
		}
		fmt.Fprintln(opts.Out, line)
		done = append(done, line)
	}
	opts.Log.Info("finished", "charts", len(done))
	return nil
}

// session is what the charts of one run share: the host lock, the journal
// and the cluster clients.
type session struct {
	lock     *journal.Lock
	store    *journal.Store
	identity string
	env      *Env
}

func openSession(_ context.Context, opts *Options) (*session, error) {
	stateDir, lockFile := LocalPaths(opts.HostRoot, opts.StateDir, opts.LockFile)
	if err := host.CheckWritable(stateDir, lockFile); err != nil {
		return nil, err
	}
	lock, err := journal.Acquire(lockFile)
	if err != nil {
		return nil, err
	}
	s := &session{lock: lock}
	if s.store, err = journal.Open(stateDir); err != nil {
		s.close()
		return nil, err
	}
	if s.identity, err = s.store.Identity(opts.NodeName); err != nil {
		s.close()
		return nil, fmt.Errorf("lease identity in %s: %w", stateDir, err)
	}
	cfg, err := RESTConfig(opts.Kubeconfig)
	if err != nil {
		s.close()
		return nil, err
	}
	if opts.WrapTransport != nil {
		cfg.Wrap(opts.WrapTransport)
	}
	if s.env, err = NewEnv(cfg, opts.Log); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *session) close() { _ = s.lock.Release() }

func (s *session) state(opts *Options, c spec.Chart) (*State, error) {
	src, err := chartpkg.NewSource(c.Chart.Source, chartpkg.SourceOptions{CAFile: opts.CAFile})
	if err != nil {
		return nil, fmt.Errorf("chart source of %s: %w", c.Target, err)
	}
	return &State{Opts: opts, Env: s.env, Journal: s.store, Identity: s.identity, Chart: c, Source: src,
		events: &Events{Component: "chart-upgrader"},
		hooks:  &hooks{dir: opts.HooksDir, timeout: opts.HookTimeout, hostRoot: opts.HostRoot}}, nil
}

// planCharts returns the charts to upgrade: those of --spec, or the one
// --target with --chart-source and --policy.
func planCharts(opts Options) ([]spec.Chart, string, error) {
	switch {
	case opts.SpecFile != "" && opts.Target != "":
		return nil, "", outcome.BadInput(errors.New("give --spec or --target, not both"))
	case opts.SpecFile != "":
		if opts.PolicyFile != "" || len(opts.Set) > 0 || len(opts.Files) > 0 || opts.ChartSource != "" {
			return nil, "", outcome.BadInput(errors.New("--policy, --set, -f and --chart-source go with --target; with --spec, put rules in the spec"))
		}
		sp, err := spec.LoadSpec(opts.SpecFile)
		if err != nil {
			return nil, "", fmt.Errorf("--spec: %w", err)
		}
		return sp.Charts, opts.SpecFile, nil
	case opts.Target != "":
		t, err := spec.ParseTarget(opts.Target)
		if err != nil {
			return nil, "", outcome.BadInput(fmt.Errorf("--target: %w", err))
		}
		if opts.ChartSource == "" {
			return nil, "", outcome.BadInput(errors.New("--chart-source is required with --target"))
		}
		c := spec.Chart{Target: t, Chart: spec.ChartRef{Name: opts.ChartName, Source: opts.ChartSource},
			Wait: spec.Wait{Timeout: spec.DefaultWaitTimeout}}
		if opts.PolicyFile != "" {
			p, err := spec.LoadPolicy(opts.PolicyFile)
			if err != nil {
				return nil, "", fmt.Errorf("--policy: %w", err)
			}
			c.Rules, c.Migrations = p.Rules, p.Migrations
		}
		return []spec.Chart{c}, "", nil
	default:
		// under system-upgrade-controller: the spec in the Plan's secret
		if len(opts.Set) > 0 || len(opts.Files) > 0 || opts.PolicyFile != "" || opts.ChartSource != "" {
			return nil, "", outcome.BadInput(errors.New("--policy, --set, -f and --chart-source need --target"))
		}
		path, err := DiscoverSpec(opts.SecretsDir)
		if err != nil {
			return nil, "", err
		}
		opts.Log.Info("upgrade spec from the Plan's secret", "spec", path)
		opts.SpecFile = path
		return planCharts(opts)
	}
}

// DefaultHostRoot is where system-upgrade-controller mounts the node's /.
const DefaultHostRoot = "/host"

// LocalPaths returns the state directory and the lock file (DESIGN §6):
// the flags when given; else under the host root (/host) when it exists
// (run by system-upgrade-controller); else under $XDG_STATE_HOME.
func LocalPaths(hostRoot, stateDir, lockFile string) (string, string) {
	if hostRoot == "" {
		hostRoot = DefaultHostRoot
	}
	host := false
	if fi, err := os.Stat(hostRoot); err == nil && fi.IsDir() {
		host = true
	}
	if stateDir == "" {
		switch {
		case host:
			stateDir = filepath.Join(hostRoot, "var", "lib", "chart-upgrader")
		case os.Getenv("XDG_STATE_HOME") != "":
			stateDir = filepath.Join(os.Getenv("XDG_STATE_HOME"), "chart-upgrader")
		default:
			home, _ := os.UserHomeDir()
			stateDir = filepath.Join(home, ".local", "state", "chart-upgrader")
		}
	}
	if lockFile == "" {
		if host {
			lockFile = filepath.Join(hostRoot, "run", "chart-upgrader", "upgrade.lock")
		} else {
			lockFile = filepath.Join(stateDir, "upgrade.lock")
		}
	}
	return stateDir, lockFile
}

// writeTermination writes the one-line result where Kubernetes reads it.
// The default path is written only when it exists (in a pod).
func writeTermination(opts Options, verb string, err error) {
	path := opts.TerminationLog
	if path == "" {
		path = DefaultTerminationLog
	}
	if path == DefaultTerminationLog {
		if _, statErr := os.Stat(path); statErr != nil {
			return
		}
	}
	line := "ok: " + verb
	if err != nil {
		line = fmt.Sprintf("exit %d: %s", outcome.Code(err), strings.ReplaceAll(err.Error(), "\n", " "))
	}
	if len(line) > 4000 {
		line = line[:4000]
	}
	if werr := os.WriteFile(path, []byte(line+"\n"), 0o644); werr != nil {
		opts.Log.Warn("could not write the termination log", "path", path, "error", werr.Error())
	}
}
