package e2erelease

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The people whose releases the tool upgrades run the Helm CLI before it
// and after it: a release installed by each CLI (3 and 4, built by
// scripts/testenv), upgraded by chart-upgrader, is then upgraded with
// --reuse-values --set and rolled back by the same CLI, which carries on
// from the tool's revision: the values the tool decided are the ones it
// reuses, and the rollback restores them. Each revision keeps the apply
// method of the install: Helm 4's server-side release stays server-side
// through the tool, its upgrade and its rollback (with no field-manager
// conflict: the tool applies as "helm"); Helm 3's stays client-side (Helm
// 3 records no method; the tool's Helm 4 records "csa").
func TestHelmCLICarriesOnAfterTheTool(t *testing.T) {
	method := map[string]string{"helm3": "", "helm4": "ssa"}
	toolMethod := map[string]string{"helm3": "csa", "helm4": "ssa"}
	for _, cli := range []string{"helm3", "helm4"} {
		t.Run(cli, func(t *testing.T) {
			f := newFixture(t, "")
			bin, err := f.env.Binary(cli)
			require.NoError(t, err)
			name := releaseName()
			helm := f.helmCLI(bin)

			values := filepath.Join(t.TempDir(), "values.yaml")
			data, err := yaml.Marshal(f.installerValues())
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(values, data, 0o600))
			helm("install", name, filepath.Join(f.charts, "demo-app-1.0.0"), "-f", values)
			h := f.history(name)
			require.Len(t, h, 1)
			require.Equal(t, "deployed", h[0].Info.Status.String())
			require.Equal(t, method[cli], h[0].ApplyMethod, "the install's apply method")

			r := f.cli(newNode(t, "node-1"), "upgrade", f.upgradeArgs(name, "2.0.0")...)
			require.Equal(t, 0, r.Code, "stderr: %s", r.Stderr)
			h = f.history(name)
			require.Len(t, h, 2)
			decided := h[1].Config
			require.Equal(t, "2.0.0", h[1].Chart.Metadata.Version)
			promote, _ := decided["promote"].(map[string]any)
			require.Equal(t, "10.52.0.0/16", promote["clusterPodCIDR"], "the tool's decision is in its revision")
			assert.Equal(t, toolMethod[cli], h[1].ApplyMethod, "the tool kept the release's apply method")

			helm("upgrade", name, filepath.Join(f.charts, "demo-app-2.0.0"), "--reuse-values", "--set", "fromCLI=yes")
			h = f.history(name)
			require.Len(t, h, 3)
			assert.Equal(t, "deployed", h[2].Info.Status.String())
			assert.Equal(t, "superseded", h[1].Info.Status.String())
			want := maps.Clone(decided)
			want["fromCLI"] = "yes"
			assert.Equal(t, want, h[2].Config, "--reuse-values reused the tool's values")
			assert.Equal(t, method[cli], h[2].ApplyMethod, "helm upgrade kept the apply method")

			helm("rollback", name, "2")
			h = f.history(name)
			require.Len(t, h, 4)
			assert.Equal(t, "deployed", h[3].Info.Status.String())
			assert.Equal(t, "2.0.0", h[3].Chart.Metadata.Version)
			assert.Equal(t, decided, h[3].Config, "the rollback restored the tool's revision")
			assert.Equal(t, method[cli], h[3].ApplyMethod, "helm rollback kept the apply method")
		})
	}
}

// helmCLI returns a function that runs the Helm CLI bin against the
// fixture's namespace (waiting, as an operator would) and fails the test
// when it fails. Its configuration, cache and data go to the test's own
// directories.
func (f *fixture) helmCLI(bin string) func(args ...string) {
	home := f.t.TempDir()
	return func(args ...string) {
		f.t.Helper()
		cmd := f.helmCommand(bin, home, append(args, "--wait", "--timeout", "60s")...)
		out, err := cmd.CombinedOutput()
		require.NoError(f.t, err, "%s %s:\n%s", filepath.Base(bin), strings.Join(cmd.Args[1:], " "), out)
	}
}

// helmCommand is the Helm CLI bin with args against the fixture's
// namespace, its configuration, cache and data under home (not started).
func (f *fixture) helmCommand(bin, home string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(f.t.Context(), bin, append(args, "--namespace", f.ns, "--kubeconfig", f.env.KubeconfigPath())...)
	cmd.Env = append(os.Environ(), testenv.HelmCLIEnv(home)...)
	return cmd
}
