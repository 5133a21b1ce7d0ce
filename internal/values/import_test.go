package values_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pure packages (docs/design.md §3.1) must not reach a cluster or run Helm
// actions, not even transitively. Each must exist: a path that is not a
// package fails the test.
var pureImports = []string{
	"github.com/chart-upgrader/chart-upgrader/internal/values",
	"github.com/chart-upgrader/chart-upgrader/internal/spec",
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade", // the core
	"github.com/chart-upgrader/chart-upgrader/internal/provenance",
	"github.com/chart-upgrader/chart-upgrader/internal/health",
	"github.com/chart-upgrader/chart-upgrader/internal/registries",
}

// forbiddenImport reports why an import path is not allowed in a pure
// package, or "" when it is.
func forbiddenImport(path string) string {
	switch {
	case path == "k8s.io/client-go" || strings.HasPrefix(path, "k8s.io/client-go/"):
		return "client-go talks to a cluster"
	case path == "helm.sh/helm/v4/pkg/action":
		return "Helm's action package runs releases"
	}
	return ""
}

func TestForbiddenImport(t *testing.T) {
	assert.NotEmpty(t, forbiddenImport("k8s.io/client-go"))
	assert.NotEmpty(t, forbiddenImport("k8s.io/client-go/dynamic"))
	assert.NotEmpty(t, forbiddenImport("helm.sh/helm/v4/pkg/action"))
	assert.Empty(t, forbiddenImport("k8s.io/client-go-extra"))
	assert.Empty(t, forbiddenImport("k8s.io/apimachinery/pkg/api/resource"))
	assert.Empty(t, forbiddenImport("helm.sh/helm/v3/pkg/chartutil"))
	assert.Empty(t, forbiddenImport("helm.sh/helm/v3/pkg/actionx"))
}

// TestPureImports runs `go list -deps` on each pure package.
func TestPureImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not available")
	}
	for _, pkg := range pureImports {
		t.Run(pkg, func(t *testing.T) {
			cmd := exec.Command(goBin, "list", "-deps", pkg)
			out, err := cmd.Output()
			if err != nil {
				stderr := ""
				if ee, ok := err.(*exec.ExitError); ok {
					stderr = string(ee.Stderr)
				}
				require.NoError(t, err, "go list -deps %s: %s", pkg, stderr)
			}
			deps := strings.Fields(string(out))
			require.NotEmpty(t, deps)
			require.Equal(t, pkg, deps[len(deps)-1], "go list -deps lists the package itself last")
			for _, d := range deps {
				if why := forbiddenImport(d); why != "" {
					t.Errorf("%s imports %s (transitively): %s", pkg, d, why)
				}
			}
		})
	}
}
