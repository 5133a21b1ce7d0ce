package suc_test

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	upgradev1 "github.com/rancher/system-upgrade-controller/pkg/apis/upgrade.cattle.io/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/suc"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func minimal() suc.PlanOptions {
	return suc.PlanOptions{Name: "chart-upgrader", Image: "ghcr.io/chart-upgrader/chart-upgrader", Version: "1.4.3"}
}

func TestBuildDefaults(t *testing.T) {
	plan, err := suc.Build(minimal())
	require.NoError(t, err)
	assert.Equal(t, "upgrade.cattle.io/v1", plan.APIVersion)
	assert.Equal(t, "Plan", plan.Kind)
	assert.Equal(t, "chart-upgrader", plan.Name)
	assert.Equal(t, "system-upgrade", plan.Namespace)

	s := plan.Spec
	assert.EqualValues(t, 1, s.Concurrency)
	assert.EqualValues(t, 1800, s.JobActiveDeadlineSecs, "20m wait + 10m, far above the controller's 600 s default")
	assert.Equal(t, map[string]string{"chart-upgrader.io/upgrade": "true"}, s.NodeSelector.MatchLabels)
	assert.Empty(t, s.NodeSelector.MatchExpressions)
	assert.Equal(t, "chart-upgrader", s.ServiceAccountName)
	assert.Equal(t, "1.4.3", s.Version)
	assert.Empty(t, s.Channel)
	assert.Equal(t, []upgradev1.SecretSpec{{Name: "chart-upgrader-spec", Path: "/run/system-upgrade/secrets/chart-upgrader-spec"}}, s.Secrets)
	assert.False(t, s.Cordon)
	assert.Nil(t, s.Drain)

	require.NotNil(t, s.Upgrade)
	assert.Equal(t, "ghcr.io/chart-upgrader/chart-upgrader", s.Upgrade.Image)
	assert.Empty(t, s.Upgrade.Command, "the image's entrypoint is chart-upgrader")
	assert.Equal(t, []string{"upgrade"}, s.Upgrade.Args)
	assert.Equal(t, []corev1.EnvVar{{Name: "CHART_UPGRADER_SPEC", Value: "/run/system-upgrade/secrets/chart-upgrader-spec/spec.yaml"}}, s.Upgrade.Env)

	want := []corev1.Toleration{
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/master", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
	}
	assert.Equal(t, want, s.Tolerations)

	// unprivileged, as uid 17017, after a prepare container that makes its
	// directories under /host that user's
	assertLeastPrivilege(t, s.Upgrade.SecurityContext, 17017, 17017)
	require.NotNil(t, s.Prepare, "a non-root upgrade needs its directories prepared")
	assert.Equal(t, s.Upgrade.Image, s.Prepare.Image, "the same image, tagged by the controller the same way")
	assert.Empty(t, s.Prepare.Command, "the image's entrypoint is chart-upgrader")
	assert.Equal(t, []string{"host", "prepare", "--owner", "17017:17017"}, s.Prepare.Args)
	assert.Empty(t, s.Prepare.Env)
	p := s.Prepare.SecurityContext
	require.NotNil(t, p, "without one the runtime's default capabilities apply")
	assert.EqualValues(t, 0, *p.RunAsUser, "root, to create directories in the host's root-owned /var/lib and /run")
	assert.False(t, *p.RunAsNonRoot)
	assert.Equal(t, []corev1.Capability{"ALL"}, p.Capabilities.Drop)
	assert.Equal(t, []corev1.Capability{"CHOWN"}, p.Capabilities.Add, "CAP_CHOWN alone")
	assert.False(t, *p.Privileged)
	assert.False(t, *p.AllowPrivilegeEscalation)
	assert.True(t, *p.ReadOnlyRootFilesystem)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, p.SeccompProfile.Type)
}

// assertLeastPrivilege checks the upgrade container's securityContext: not
// privileged, no escalation, no capability, read-only root, the runtime's
// seccomp profile, uid:gid.
func assertLeastPrivilege(t *testing.T, c *corev1.SecurityContext, uid, gid int64) {
	t.Helper()
	require.NotNil(t, c, "without a securityContext the controller runs the container privileged")
	require.NotNil(t, c.Privileged)
	assert.False(t, *c.Privileged)
	require.NotNil(t, c.AllowPrivilegeEscalation)
	assert.False(t, *c.AllowPrivilegeEscalation)
	require.NotNil(t, c.Capabilities)
	assert.Equal(t, []corev1.Capability{"ALL"}, c.Capabilities.Drop)
	assert.Empty(t, c.Capabilities.Add)
	require.NotNil(t, c.ReadOnlyRootFilesystem)
	assert.True(t, *c.ReadOnlyRootFilesystem)
	require.NotNil(t, c.SeccompProfile)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, c.SeccompProfile.Type)
	require.NotNil(t, c.RunAsUser)
	require.NotNil(t, c.RunAsGroup)
	require.NotNil(t, c.RunAsNonRoot)
	assert.Equal(t, uid, *c.RunAsUser)
	assert.Equal(t, gid, *c.RunAsGroup)
	assert.Equal(t, uid != 0, *c.RunAsNonRoot)
}

// --run-as: another non-root user gets its own prepare; root (0:0) runs
// without capabilities and without a prepare container.
func TestBuildRunAs(t *testing.T) {
	opts := minimal()
	opts.RunAs = "1000:2000"
	plan, err := suc.Build(opts)
	require.NoError(t, err)
	assertLeastPrivilege(t, plan.Spec.Upgrade.SecurityContext, 1000, 2000)
	require.NotNil(t, plan.Spec.Prepare)
	assert.Equal(t, []string{"host", "prepare", "--owner", "1000:2000"}, plan.Spec.Prepare.Args)

	opts.RunAs = "0:0"
	plan, err = suc.Build(opts)
	require.NoError(t, err)
	assertLeastPrivilege(t, plan.Spec.Upgrade.SecurityContext, 0, 0)
	assert.Nil(t, plan.Spec.Prepare, "root owns /var/lib and /run: nothing to prepare")
	out, err := suc.Marshal(plan)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "prepare:")
	assert.Contains(t, string(out), "\n      runAsUser: 0\n")

	// the Plans share no memory
	a, err := suc.Build(minimal())
	require.NoError(t, err)
	b, err := suc.Build(minimal())
	require.NoError(t, err)
	*a.Spec.Upgrade.SecurityContext.Privileged = true
	a.Spec.Prepare.SecurityContext.Capabilities.Add[0] = "SYS_ADMIN"
	assert.False(t, *b.Spec.Upgrade.SecurityContext.Privileged)
	assert.Equal(t, []corev1.Capability{"CHOWN"}, b.Spec.Prepare.SecurityContext.Capabilities.Add)
}

func TestBuildOptions(t *testing.T) {
	grace := int32(30)
	opts := suc.PlanOptions{
		Name: "charts", Namespace: "cattle-system", Image: "registry.local:5000/mirror/chart-upgrader",
		Channel: "https://channels.example.com/v1/channels/stable", NodeSelector: "node-role.kubernetes.io/control-plane=true",
		SpecSecret: "harvester-spec", ServiceAccount: "upgrader", Concurrency: 2, Cordon: true,
		Drain:       &suc.DrainOptions{Timeout: 5 * time.Minute, GracePeriod: &grace, IgnoreDaemonSets: true, Force: true, SkipWaitForDeleteTimeout: 60},
		WaitTimeout: 45 * time.Minute, Tolerations: []corev1.Toleration{},
	}
	plan, err := suc.Build(opts)
	require.NoError(t, err)
	s := plan.Spec
	assert.Equal(t, "cattle-system", plan.Namespace)
	assert.Equal(t, "https://channels.example.com/v1/channels/stable", s.Channel)
	assert.Empty(t, s.Version)
	assert.EqualValues(t, 2, s.Concurrency)
	assert.EqualValues(t, (45+10+5)*60, s.JobActiveDeadlineSecs, "wait + margin + drain timeout")
	assert.Equal(t, map[string]string{"node-role.kubernetes.io/control-plane": "true"}, s.NodeSelector.MatchLabels)
	assert.Equal(t, "upgrader", s.ServiceAccountName)
	assert.Equal(t, "/run/system-upgrade/secrets/harvester-spec", s.Secrets[0].Path)
	assert.Equal(t, "/run/system-upgrade/secrets/harvester-spec/spec.yaml", s.Upgrade.Env[0].Value)
	assert.Empty(t, s.Tolerations, "an empty list means no tolerations")
	assert.True(t, s.Cordon)
	require.NotNil(t, s.Drain)
	assert.Equal(t, 5*time.Minute, *s.Drain.Timeout)
	assert.EqualValues(t, 30, *s.Drain.GracePeriod)
	assert.True(t, *s.Drain.IgnoreDaemonSets)
	assert.False(t, *s.Drain.DeleteEmptydirData)
	assert.True(t, s.Drain.Force)
	assert.Equal(t, 60, s.Drain.SkipWaitForDeleteTimeout)

	// the Plan shares no memory with the options
	opts.Drain.IgnoreDaemonSets, opts.Drain.Timeout, grace = false, time.Hour, 1
	assert.True(t, *s.Drain.IgnoreDaemonSets)
	assert.Equal(t, 5*time.Minute, *s.Drain.Timeout)
	assert.EqualValues(t, 30, *s.Drain.GracePeriod)
}

func TestDeadlineExceedsTheWait(t *testing.T) {
	for _, tc := range []struct {
		wait  time.Duration
		drain *suc.DrainOptions
		want  int64
	}{
		{0, nil, 1800}, // the default wait, 20m
		{20 * time.Minute, nil, 1800},
		{90 * time.Second, nil, 690},
		{time.Millisecond, nil, 601}, // rounded up
		{2 * time.Hour, nil, 7800},
		{20 * time.Minute, suc.DefaultDrain(), 2400},
		{20 * time.Minute, &suc.DrainOptions{}, 1800}, // a drain without timeout adds nothing
	} {
		opts := minimal()
		opts.WaitTimeout, opts.Drain = tc.wait, tc.drain
		plan, err := suc.Build(opts)
		require.NoError(t, err)
		assert.Equal(t, tc.want, plan.Spec.JobActiveDeadlineSecs, "wait %v drain %+v", tc.wait, tc.drain)
		assert.Greater(t, time.Duration(plan.Spec.JobActiveDeadlineSecs)*time.Second, tc.wait)
	}
}

func TestBuildAccepts(t *testing.T) {
	for name, change := range map[string]func(*suc.PlanOptions){
		"registry with port":      func(o *suc.PlanOptions) { o.Image = "registry.local:5000/chart-upgrader" },
		"single path component":   func(o *suc.PlanOptions) { o.Image = "chart-upgrader" },
		"localhost registry":      func(o *suc.PlanOptions) { o.Image = "localhost/a/b_c/d--e" },
		"version with build meta": func(o *suc.PlanOptions) { o.Version = "v1.4.3+rke2r1" }, // SUC makes it v1.4.3-rke2r1
		"channel over http":       func(o *suc.PlanOptions) { o.Version, o.Channel = "", "http://ch.svc:8080/v1/channels/x" },
		"empty label value":       func(o *suc.PlanOptions) { o.NodeSelector = "upgrade-charts=" },
		"63-character name":       func(o *suc.PlanOptions) { o.Name = strings.Repeat("a", 63) },
	} {
		t.Run(name, func(t *testing.T) {
			opts := minimal()
			change(&opts)
			_, err := suc.Build(opts)
			require.NoError(t, err)
		})
	}
}

func TestBuildRejects(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*suc.PlanOptions)
		option string // the flag named
		says   string
	}{
		{"no name", func(o *suc.PlanOptions) { o.Name = "" }, "name", "required"},
		{"name not a label", func(o *suc.PlanOptions) { o.Name = "Chart_Upgrader" }, "name", "RFC 1123"},
		{"name too long", func(o *suc.PlanOptions) { o.Name = strings.Repeat("a", 64) }, "name", "63"},
		{"bad namespace", func(o *suc.PlanOptions) { o.Namespace = "System" }, "namespace", "RFC 1123"},
		{"bad secret", func(o *suc.PlanOptions) { o.SpecSecret = "spec_secret" }, "spec-secret", "RFC 1123"},
		{"bad service account", func(o *suc.PlanOptions) { o.ServiceAccount = "-sa" }, "service-account", "RFC 1123"},
		{"no image", func(o *suc.PlanOptions) { o.Image = "" }, "image", "required"},
		{"image with tag", func(o *suc.PlanOptions) { o.Image = "ghcr.io/chart-upgrader/chart-upgrader:v0.1.0" }, "image", "has a tag (:v0.1.0)"},
		{"registry port and tag", func(o *suc.PlanOptions) { o.Image = "registry.local:5000/chart-upgrader:1" }, "image", "has a tag (:1)"},
		{"bare host:port is a tag", func(o *suc.PlanOptions) { o.Image = "localhost:5000" }, "image", "has a tag"},
		{"image with digest", func(o *suc.PlanOptions) { o.Image = "ghcr.io/x/y@sha256:0123" }, "image", "has a digest"},
		{"image upper case", func(o *suc.PlanOptions) { o.Image = "ghcr.io/Chart/upgrader" }, "image", "not an image repository"},
		{"image with space", func(o *suc.PlanOptions) { o.Image = "ghcr.io/x y" }, "image", "not an image repository"},
		{"neither version nor channel", func(o *suc.PlanOptions) { o.Version = "" }, "version", "--channel"},
		{"both version and channel", func(o *suc.PlanOptions) { o.Channel = "http://x/v1/channels/a" }, "version", "not both"},
		{"version not a tag", func(o *suc.PlanOptions) { o.Version = "1.4 beta" }, "version", "image tag"},
		{"version starting with a dot", func(o *suc.PlanOptions) { o.Version = ".1" }, "version", "image tag"},
		{"channel not a URL", func(o *suc.PlanOptions) { o.Version, o.Channel = "", "stable" }, "channel", "http(s) URL"},
		{"channel ftp", func(o *suc.PlanOptions) { o.Version, o.Channel = "", "ftp://host/x" }, "channel", "http(s) URL"},
		{"selector without =", func(o *suc.PlanOptions) { o.NodeSelector = "upgrade" }, "node-selector", "key=value"},
		{"selector without key", func(o *suc.PlanOptions) { o.NodeSelector = "=true" }, "node-selector", "key=value"},
		{"selector bad key", func(o *suc.PlanOptions) { o.NodeSelector = "a b=true" }, "node-selector", "name part must consist"},
		{"selector bad value", func(o *suc.PlanOptions) { o.NodeSelector = "upgrade=yes please" }, "node-selector", "a valid label must be"},
		{"negative concurrency", func(o *suc.PlanOptions) { o.Concurrency = -1 }, "concurrency", "at least 1"},
		{"negative wait", func(o *suc.PlanOptions) { o.WaitTimeout = -time.Second }, "wait-timeout", "positive"},
		{"negative drain timeout", func(o *suc.PlanOptions) { o.Drain = &suc.DrainOptions{Timeout: -1} }, "drain", "negative"},
		{"run-as without group", func(o *suc.PlanOptions) { o.RunAs = "1000" }, "run-as", "UID:GID"},
		{"run-as by name", func(o *suc.PlanOptions) { o.RunAs = "nobody:nogroup" }, "run-as", "UID:GID"},
		{"run-as negative", func(o *suc.PlanOptions) { o.RunAs = "-1:0" }, "run-as", "UID:GID"},
		{"run-as too large", func(o *suc.PlanOptions) { o.RunAs = "4294967295:0" }, "run-as", "2147483647"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := minimal()
			tc.change(&opts)
			plan, err := suc.Build(opts)
			require.Error(t, err)
			assert.Nil(t, plan)
			assert.ErrorIs(t, err, outcome.ErrBadInput)
			assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
			var oe *suc.OptionError
			require.True(t, errors.As(err, &oe), "%v", err)
			assert.Equal(t, tc.option, oe.Option)
			assert.True(t, strings.HasPrefix(err.Error(), "--"+tc.option), "the error names the flag: %v", err)
			assert.Contains(t, err.Error(), tc.says)
			assert.NotContains(t, err.Error(), "\n", "one line")
		})
	}
}

func TestBuildReportsEveryProblem(t *testing.T) {
	_, err := suc.Build(suc.PlanOptions{Image: "x:1", Concurrency: -2})
	require.Error(t, err)
	for _, flag := range []string{"--name: required", `--image "x:1"`, "--version: give", `--concurrency "-2"`} {
		assert.Contains(t, err.Error(), flag)
	}
}

// Marshal's output reads back as the same Plan, and the same options give
// the same bytes.
func TestMarshalRoundTrip(t *testing.T) {
	opts := minimal()
	opts.Drain = suc.DefaultDrain()
	plan, err := suc.Build(opts)
	require.NoError(t, err)
	out, err := suc.Marshal(plan)
	require.NoError(t, err)
	again, err := suc.Render(opts)
	require.NoError(t, err)
	assert.Equal(t, string(out), string(again))

	var back upgradev1.Plan
	require.NoError(t, yaml.UnmarshalStrict(out, &back))
	assert.Equal(t, *plan, back)

	text := string(out)
	assert.True(t, strings.HasPrefix(text, "apiVersion: upgrade.cattle.io/v1\nkind: Plan\nmetadata:\n"), text)
	assert.NotContains(t, text, "status")
	assert.NotContains(t, text, "creationTimestamp")
	// the one comment says the nanoseconds as a Go duration; the integer
	// stays, for the controllers that decode it as a time.Duration (above)
	assert.Equal(t, 1, strings.Count(text, "#"), text)
	assert.Contains(t, text, "\n    timeout: 600000000000 # 10m0s\n")
	assert.Contains(t, text, `chart-upgrader.io/upgrade: "true"`, "a string that reads as a bool is quoted")
	assert.Contains(t, text, "\n  tolerations:\n  - key: node-role.kubernetes.io/control-plane\n")
}

// Strings that YAML (1.1, as Kubernetes reads it, or 1.2) would read as
// another type are quoted.
func TestMarshalQuotesAmbiguousStrings(t *testing.T) {
	for version, line := range map[string]string{
		"1.5":   `version: "1.5"`,
		"1":     `version: "1"`,
		"1e3":   `version: "1e3"`,
		"1.4.3": `version: 1.4.3`,
	} {
		opts := minimal()
		opts.Version = version
		out, err := suc.Render(opts)
		require.NoError(t, err)
		assert.Contains(t, string(out), "\n  "+line+"\n")
	}
	for _, value := range []string{"true", "yes", "Y", "on", "OFF", "null", "1", "0x1F"} {
		opts := minimal()
		opts.NodeSelector = "upgrade=" + value
		out, err := suc.Render(opts)
		require.NoError(t, err)
		assert.Contains(t, string(out), "\n      upgrade: \""+value+"\"\n", "%s unquoted reads as another type", value)
		var back upgradev1.Plan
		require.NoError(t, yaml.UnmarshalStrict(out, &back), "sigs.k8s.io/yaml (YAML 1.1) reads it back")
		assert.Equal(t, value, back.Spec.NodeSelector.MatchLabels["upgrade"])
	}
	// YAML 1.1 sexagesimal: 1:20 would read as 80
	plan, err := suc.Build(minimal())
	require.NoError(t, err)
	plan.Spec.Upgrade.Env = append(plan.Spec.Upgrade.Env, corev1.EnvVar{Name: "AT", Value: "1:20"})
	out, err := suc.Marshal(plan)
	require.NoError(t, err)
	assert.Contains(t, string(out), `value: "1:20"`)
}

// A Plan with every option, as YAML (go test ./internal/suc -update
// rewrites it).
func TestMarshalGolden(t *testing.T) {
	grace := int32(30)
	out, err := suc.Render(suc.PlanOptions{
		Name: "harvester-charts", Namespace: "cattle-system", Image: "registry.local:5000/chart-upgrader",
		Channel: "http://chart-upgrader-channels.cattle-system.svc/v1/channels/stable", NodeSelector: "upgrade.example.com/charts=yes",
		SpecSecret: "harvester-spec", ServiceAccount: "harvester-upgrader", Concurrency: 2, Cordon: true,
		Drain:       &suc.DrainOptions{Timeout: 5 * time.Minute, GracePeriod: &grace, DeleteEmptydirData: true, IgnoreDaemonSets: true},
		WaitTimeout: 40 * time.Minute, RunAs: "10001:10001",
	})
	require.NoError(t, err)
	golden := filepath.Join("testdata", "every-option.yaml")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, out, 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(out))
}
