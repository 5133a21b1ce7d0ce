package targets

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/spec"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Every registered kind is complete and its own: a name, a spelling that is
// the name in other case, an apiVersion, an example the spec parser reads
// back as the kind, Plan defaults naming a directory of example manifests
// that exists, Lease and backup names that differ from every other kind's.
func TestRegistryKindsAreComplete(t *testing.T) {
	ks := Kinds()
	require.NotEmpty(t, ks)
	leases, backups := map[string]string{}, map[string]string{}
	for _, k := range ks {
		t.Run(k.Name, func(t *testing.T) {
			assert.Equal(t, strings.ToLower(k.Name), k.Name, "a name is lower case")
			assert.True(t, strings.EqualFold(k.Spelling, k.Name), "the spelling %s is the name %s", k.Spelling, k.Name)
			assert.NotEmpty(t, k.APIVersion)
			assert.NotEmpty(t, k.Summary)
			tg, err := spec.ParseTarget(k.Example, ks)
			require.NoError(t, err)
			assert.Equal(t, k.Name, tg.Kind)
			for _, v := range []string{k.Plan.Name, k.Plan.NodeSelector, k.Plan.SpecSecret, k.Plan.ServiceAccount} {
				assert.NotEmpty(t, v)
			}
			info, err := os.Stat(filepath.Join("..", "..", k.Plan.Dir))
			require.NoError(t, err, "plans of %s", k.Name)
			assert.True(t, info.IsDir())
			if k.Options != nil {
				assert.NotNil(t, k.Options.Default(), "options have defaults")
				assert.NotNil(t, k.Options.Parse)
			}
			lease, backup := k.LeaseName("x"), k.BackupName("x", "1.0.0")
			assert.NotContains(t, leases, lease, "the Lease of %s is another kind's", k.Name)
			assert.NotContains(t, backups, backup, "the backups of %s are another kind's", k.Name)
			leases[lease], backups[backup] = k.Name, k.Name
		})
	}
}

// Open gives each kind's adapter, whose Ref carries the kind's name; an
// unknown kind is bad input naming the known ones.
func TestOpen(t *testing.T) {
	c := &cluster.Clients{Config: &rest.Config{Host: "https://127.0.0.1:1"}}
	for _, k := range Kinds() {
		tg, err := Open(c, upgrade.Ref{Kind: strings.ToUpper(k.Name), Namespace: "ns", Name: "n"}, nil, kind.DefaultApply)
		require.NoError(t, err)
		assert.Equal(t, upgrade.Ref{Kind: k.Name, Namespace: "ns", Name: "n"}, tg.Ref())
	}
	_, err := Open(c, upgrade.Ref{Kind: "fleetbundle", Namespace: "ns", Name: "n"}, nil, kind.DefaultApply)
	require.ErrorIs(t, err, outcome.ErrBadInput)
	assert.EqualError(t, err, `target fleetbundle/ns/n: unknown kind "fleetbundle" (want managedchart, helmchart or release)`)
	_, err = Lookup("--kind", "nope")
	assert.EqualError(t, err, `--kind: unknown kind "nope" (want managedchart, helmchart or release)`)
	d, err := Lookup("--kind", "HelmChart")
	require.NoError(t, err)
	assert.Equal(t, "helmchart", d.Name)
}

// No package outside internal/targets spells a kind: every string literal
// of the non-test Go code of internal/ and cmd/ is searched for a kind's
// name or spelling, alone or as the start of a target (KIND/…). The kind
// named "release" is also a word Helm uses (a storage key), so only its
// target form counts for it.
func TestNoKindIsSpelledOutsideTheRegistry(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	for _, dir := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() {
				if rel == filepath.Join("internal", "targets") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if _, ok := n.(*ast.ImportSpec); ok {
					return false // an import path (helm.sh/helm/v4/pkg/release/v1) names no kind
				}
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, _ := strconv.Unquote(lit.Value)
				for _, k := range Kinds() {
					if strings.Contains(strings.ToLower(s), k.Name+"/") ||
						(k.Name != "release" && (strings.Contains(s, k.Name) || strings.Contains(s, k.Spelling))) {
						found = append(found, fmt.Sprintf("%s: %q names kind %s", rel, s, k.Name))
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	assert.Empty(t, found, "a kind spelled outside internal/targets: read it from the registry")
}
