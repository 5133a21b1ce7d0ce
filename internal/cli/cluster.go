package cli

import (
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/chart-upgrader/chart-upgrader/internal/app"
	"github.com/chart-upgrader/chart-upgrader/internal/host"
	"github.com/chart-upgrader/chart-upgrader/internal/imagecheck"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// localFlags are accepted by every command that talks to a cluster: how
// to reach it, where this node keeps its records, how to log.
func localFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{TakesFile: true, Name: "kubeconfig", Usage: "kubeconfig `FILE` (default: $KUBECONFIG, else the in-cluster service account)"},
		&dirFlag{ucli.StringFlag{Name: "host-root", Value: host.DefaultHostRoot, Usage: "`DIR` where the node's / is mounted (system-upgrade-controller: /host); state and lock go under it when it exists"}},
		&dirFlag{ucli.StringFlag{Name: "state-dir", Usage: "journal `DIR` (default: <host-root>/var/lib/chart-upgrader when the host root exists, else $XDG_STATE_HOME/chart-upgrader)"}},
		&ucli.StringFlag{TakesFile: true, Name: "lock-file", Usage: "host lock `FILE` (default: <host-root>/run/chart-upgrader/upgrade.lock when the host root exists, else in the state dir)"},
		&ucli.StringFlag{TakesFile: true, Name: "termination-log", Value: host.DefaultTerminationLog, Usage: "`FILE` for the one-line result (the default is written only when it exists)"},
		&ucli.StringFlag{Name: "log-format", Value: "auto", Usage: "`FORMAT` of the logs on stderr: text, json, or auto (text on a terminal)"},
	}
}

// jobFlags are accepted by the commands that may write a target (upgrade,
// preflight, rollback): who this process is, for the Lease and Events.
func jobFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.StringFlag{Name: "node-name", EnvVars: []string{"SYSTEM_UPGRADE_NODE_NAME"}, Usage: "this node's `NAME`, for the Lease identity and Events (default: the host name)"},
		&ucli.DurationFlag{Name: "lease-duration", Value: 30 * time.Second, Usage: "how long a crashed process holds the apply `DURATION` before another may take over"},
		// what system-upgrade-controller says about the Job (logs, Events, Lease)
		&ucli.StringFlag{Name: "plan", EnvVars: []string{"SYSTEM_UPGRADE_PLAN_NAME"}, Usage: "the SUC Plan `NAME` running this (default $SYSTEM_UPGRADE_PLAN_NAME)"},
		&ucli.StringFlag{Name: "plan-hash", EnvVars: []string{"SYSTEM_UPGRADE_PLAN_LATEST_HASH"}, Usage: "the Plan's `HASH` (default $SYSTEM_UPGRADE_PLAN_LATEST_HASH)"},
		&ucli.StringFlag{Name: "pod-name", EnvVars: []string{"SYSTEM_UPGRADE_POD_NAME"}, Usage: "this pod's `NAME` (default $SYSTEM_UPGRADE_POD_NAME)"},
		&ucli.StringFlag{Name: "pod-uid", EnvVars: []string{"SYSTEM_UPGRADE_POD_UID"}, Usage: "this pod's `UID` (default $SYSTEM_UPGRADE_POD_UID)"},
	}
}

// flags joins flag lists.
func flags(lists ...[]ucli.Flag) []ucli.Flag {
	var out []ucli.Flag
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// targetFlags name what to upgrade.
func targetFlags() []ucli.Flag {
	return flags([]ucli.Flag{
		&ucli.StringFlag{TakesFile: true, Name: "spec", Usage: "upgrade spec `FILE` (charts in order, with their sources, rules and migrations)"},
		&ucli.StringFlag{Name: "target", Usage: "one target, `KIND/NAMESPACE/NAME`, KIND one of " + kind.Or(targets.Kinds().Names()) + " (instead of --spec)"},
		&dirFlag{ucli.StringFlag{Name: "chart-source", Usage: "with --target: a `DIR` of charts (.tgz or directories), a Helm repository URL or an oci:// registry" + ownSourceNote()}},
		&ucli.StringFlag{Name: "chart-name", Usage: "with --target: the chart `NAME` in the source (default: the chart the target deploys)"},
		&ucli.StringFlag{TakesFile: true, Name: "policy", Usage: "with --target: policy `FILE` (rules: and migrations:)"},
		&ucli.StringFlag{Name: "crds", Usage: "with --target: what the upgrade does with the chart's crds/, as the spec's apply.crds: `POLICY` " + strings.Join(kind.CRDPolicies, ", ") + " (default skip)"},
		&ucli.BoolFlag{Name: "crds-migrate", Usage: "with --target and --crds createReplace: migrate the objects off a stored version a new CRD drops or stops serving, as apply.crds {migrate: true}"},
	}, explicitFlags("with --target: "), []ucli.Flag{
		&ucli.StringFlag{Name: "version", EnvVars: []string{"SYSTEM_UPGRADE_PLAN_LATEST_VERSION"}, Usage: "chart `VERSION` to upgrade to (default: $SYSTEM_UPGRADE_PLAN_LATEST_VERSION)"},
		&ucli.DurationFlag{Name: "timeout", DefaultText: "the spec's wait.timeout, else 20m", Usage: "how long to wait for readiness: `DURATION`, overriding the spec's wait.timeout"},
		&ucli.StringFlag{Name: "pod-failure-grace", DefaultText: "the spec's wait.podFailureGrace, else 2m", Usage: "how long a container of the new revision may fail to start (ImagePullBackOff, CrashLoopBackOff, …) before the wait gives up with exit 1: `DURATION`, or 0 for never; overrides the spec's wait.podFailureGrace"},
		&ucli.StringFlag{Name: "settle", DefaultText: "the spec's wait.settle, else 10s", Usage: "how long the target must stay ready, its pods watched, before the upgrade is done; a container of the new revision that crashes meanwhile fails it with exit 1 (a container without a readiness probe is Ready between two crashes): `DURATION`, or 0 for off; overrides the spec's wait.settle"},
		&ucli.BoolFlag{Name: "allow-downgrade", Usage: "allow a target version older than the deployed one"},
		&ucli.BoolFlag{Name: "unpause", Usage: "upgrade (and unpause) a target that someone else paused"},
		&ucli.BoolFlag{Name: "require-nodes-ready", Usage: "refuse unless every node is Ready"},
		&ucli.StringFlag{TakesFile: true, Name: "ca-file", Usage: "extra CA certificates `FILE` for Helm repository URLs"},
		&ucli.StringFlag{TakesFile: true, Name: "registries-config", Usage: "the nodes' k3s/RKE2 registries.yaml `FILE` the image check pulls as (default: <host-root>/etc/rancher/rke2/registries.yaml, else <host-root>/etc/rancher/k3s/registries.yaml, when one exists; none: each image from its own registry)"},
		&ucli.BoolFlag{Name: "skip-image-check", Usage: "check no image before the apply (the report says the images were not checked)"},
		&ucli.StringFlag{Name: "image-manifests", Value: imagecheck.ManifestsGet, Usage: "how the image check asks for each manifest: `HOW` " + imagecheck.ManifestsGet + " (its body: an index's platforms, a single-platform image's config, so every platform is judged as the node judges it) or " + imagecheck.ManifestsHead + " (a HEAD; an index's body only: a single-platform image's platform is not read, and a registry that counts manifest GETs as pulls, as Docker Hub does, counts none for it)"},
		&ucli.DurationFlag{Name: "image-timeout", Value: imagecheck.DefaultTimeout, Usage: "how long one registry endpoint may take to answer the image check (`DURATION`); slower counts as not answering"},
		&dirFlag{ucli.StringFlag{Name: "hooks-dir", Usage: "`DIR` of pre-<phase> and post-<phase> hooks (default: the directory of a spec found in the Plan's secret)"}},
		&ucli.DurationFlag{Name: "hook-timeout", Value: host.DefaultHookTimeout, Usage: "how long one hook may run (`DURATION`)"},
		&dirFlag{ucli.StringFlag{Name: "secrets-dir", Value: host.DefaultSecretsDir, Usage: "without --spec and --target, the spec is `DIR`/<secret>/spec.yaml (where SUC mounts Plan secrets)"}},
	})
}

// local gathers the localFlags.
func local(c *ucli.Context) app.Local {
	return app.Local{Kubeconfig: c.String("kubeconfig"), HostRoot: c.String("host-root"), StateDir: c.String("state-dir"),
		LockFile: c.String("lock-file"), TerminationLog: c.String("termination-log"),
		Log: logger(c.App.ErrWriter, c.String("log-format")), Out: c.App.Writer}
}

// sucInfo gathers what system-upgrade-controller says about the Job.
func sucInfo(c *ucli.Context) host.SUC {
	return host.SUC{Plan: c.String("plan"), PlanHash: c.String("plan-hash"), Pod: c.String("pod-name"), PodUID: c.String("pod-uid")}
}

// logger logs to w: text on a terminal, JSON otherwise (or as asked).
func logger(w io.Writer, format string) *slog.Logger {
	if format == "auto" {
		format = "json"
		if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
			format = "text"
		}
	}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, nil))
	}
	return slog.New(slog.NewJSONHandler(w, nil))
}

// ownSourceNote names the kinds whose object may name its chart source.
func ownSourceNote() string {
	var own []string
	for _, k := range targets.Kinds() {
		if k.OwnSource {
			own = append(own, "a "+k.Spelling)
		}
	}
	if len(own) == 0 {
		return ""
	}
	return " (" + kind.Or(own) + " may name its own)"
}

// kindSummaries says what each kind's target is.
func kindSummaries() string {
	var out []string
	for _, k := range targets.Kinds() {
		out = append(out, k.Summary)
	}
	return strings.Join(out, "; ")
}
