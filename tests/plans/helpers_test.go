// Package plans tests the manifests in plans/ against a real API server:
// every object is accepted, the Plans are what `chart-upgrader plan`
// prints, the spec and channel configuration parse and agree with the
// Plans and the RBAC, and the RBAC lets a whole upgrade run while granting
// nothing it does not use.
package plans

import (
	"bufio"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) {
	// the audit log shows which requests the ServiceAccount made (rbac_test.go)
	testenv.Main(m, testenv.Options{AuditLog: true})
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	return root
}

// planFile reads a file of plans/.
func planFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "plans", name))
	require.NoError(t, err)
	return string(data)
}

// manifestFiles are the YAML files of plans/, in apply order.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "plans", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	sort.Strings(files)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Base(f)
	}
	return names
}

// objects parses the documents of a multi-document manifest; documents
// holding only comments are skipped.
func objects(t *testing.T, file, text string) []*unstructured.Unstructured {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err, "%s document %d", file, i)
		var obj map[string]any
		require.NoError(t, yaml.UnmarshalStrict(doc, &obj), "%s document %d", file, i)
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		require.NotEmpty(t, u.GetKind(), "%s document %d has no kind", file, i)
		out = append(out, u)
	}
}

// find returns the one object of kind and name.
func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			require.Nil(t, found, "two %s %s", kind, name)
			found = o
		}
	}
	require.NotNil(t, found, "no %s %s", kind, name)
	return found
}

// mapper maps kinds to resources through the API server's discovery.
func mapper(t *testing.T, env *testenv.Env) *restmapper.DeferredDiscoveryRESTMapper {
	t.Helper()
	disc, err := discovery.NewDiscoveryClientForConfig(env.Config())
	require.NoError(t, err)
	return restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
}

// planCommandMarker starts the comment line of a Plan file that records
// the command generating it.
const planCommandMarker = "# $ chart-upgrader plan "

// planCommand returns the arguments after `chart-upgrader plan` recorded
// in a Plan file's header.
func planCommand(t *testing.T, file, text string) []string {
	t.Helper()
	var found []string
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, planCommandMarker); ok {
			require.Nil(t, found, "%s records two commands", file)
			found = strings.Fields(rest)
		}
		if !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
			break
		}
	}
	require.NotEmpty(t, found, "%s: no %q line in the leading comment", file, planCommandMarker)
	return found
}

// body is text without its leading comment (and blank) lines.
func body(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, line := range lines {
		if s := strings.TrimSpace(line); s != "" && !strings.HasPrefix(s, "#") {
			return strings.Join(lines[i:], "")
		}
	}
	return ""
}

// flagValue returns the value of --name in args ("" when absent).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

// replaceAll replaces each old with its new in text and fails when an old
// is missing, so a change to the file cannot silently skip a rewrite.
func replaceAll(t *testing.T, what, text string, pairs ...string) string {
	t.Helper()
	require.Zero(t, len(pairs)%2)
	for i := 0; i < len(pairs); i += 2 {
		require.Contains(t, text, pairs[i], "%s no longer contains %q", what, pairs[i])
		text = strings.ReplaceAll(text, pairs[i], pairs[i+1])
	}
	return text
}

// acceptAll creates every object of text (file of plans/) as a
// server-side dry run, as `kubectl apply --dry-run=server` would, and
// counts them by kind.
func acceptAll(t *testing.T, env *testenv.Env, m meta.RESTMapper, file, text string) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	for _, obj := range objects(t, file, text) {
		gvk := obj.GroupVersionKind()
		mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
		require.NoError(t, err, "%s: %s", file, gvk)
		res := env.Dynamic().Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			_, err = res.Namespace(obj.GetNamespace()).Create(t.Context(), obj, dryRun)
		} else {
			_, err = res.Create(t.Context(), obj, dryRun)
		}
		require.NoError(t, err, "%s: %s %s", file, obj.GetKind(), obj.GetName())
		kinds[obj.GetKind()]++
	}
	return kinds
}
