package badinput

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	example "github.com/chart-upgrader/chart-upgrader/tests/fixture"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
	"github.com/chart-upgrader/chart-upgrader/tests/fleetsim"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, testenv.Options{AuditLog: true}) }

// world is the cluster the corpus runs against: a namespace on the shared
// API server (with its audit log), the Fleet simulator serving it, and one
// ManagedChart of the bundled example installed at 1.0.0 and ready.
type world struct {
	helmRepo string // the Helm repository the corpus's HelmCharts name
	t        *testing.T
	env      *testenv.Env
	ns       string
	name     string // the ManagedChart
	charts   string // a directory holding the example charts 1.0.0 and 2.0.0
	root     string // the repository root
	tc       *managedchart.Client
}

func newWorld(t *testing.T) *world {
	t.Helper()
	env := testenv.ForTest(t)
	require.NotEmpty(t, env.AuditLogPath(), "the audit log is on")
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	w := &world{t: t, env: env, ns: env.Namespace(t), name: "app", charts: t.TempDir(), root: root,
		tc: &managedchart.Client{Dynamic: env.Dynamic(), Kube: env.Kube()}}
	require.NoError(t, example.CopyDir(filepath.Join(root, "package", "examples", "charts"), w.charts))

	_, stopSim, err := fleetsim.Start(t.Context(), fleetsim.Options{Config: env.Config(), Loader: fleetsim.DirLoader(w.charts), Namespace: w.ns})
	require.NoError(t, err)
	t.Cleanup(stopSim)

	_, err = example.InstallAndWait(t.Context(), env,
		example.Install{Namespace: w.ns, Name: w.name, Version: "1.0.0", Values: example.UserValues()}, 60*time.Second)
	require.NoError(t, err)
	w.helmCharts(t)
	return w
}

// helmCharts creates the HelmCharts of the corpus (no helm-controller
// runs here: they stay as written): one whose spec.repo serves only 1.0.0,
// and three whose values are broken.
func (w *world) helmCharts(t *testing.T) {
	t.Helper()
	repoServer := httptest.NewServer(repo("apiVersion: v1\nentries:\n  demo-app:\n  - {apiVersion: v2, name: demo-app, version: 1.0.0, urls: [demo-app-1.0.0.tgz]}\n", nil))
	t.Cleanup(repoServer.Close)
	w.helmRepo = repoServer.URL
	for name, spec := range map[string]map[string]any{
		"hc-repo":    {"chart": "demo-app", "repo": repoServer.URL, "version": "1.0.0", "valuesContent": "replicas: 1\n"},
		"hc-badyaml": {"chart": "demo-app", "repo": repoServer.URL, "version": "1.0.0", "valuesContent": "image: [1, 2\n"},
		"hc-notamap": {"chart": "demo-app", "repo": repoServer.URL, "version": "1.0.0", "valuesContent": "- a\n- b\n"},
		"hc-badset":  {"chart": "demo-app", "repo": repoServer.URL, "version": "1.0.0", "set": map[string]any{"image[x]": "1"}},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "helm.cattle.io/v1", "kind": "HelmChart",
			"metadata": map[string]any{"name": name, "namespace": w.ns}, "spec": spec}}
		_, err := w.env.Dynamic().Resource(helmchart.HelmChartGVR).Namespace(w.ns).Create(t.Context(), u, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// mark is what must not change on the ManagedChart when a command refuses
// its input.
type mark struct {
	Generation      int64
	Version         string
	Paused          bool
	ValuesHash      string
	Annotations     map[string]string
	ResourceVersion string // for the message only: status updates change it
}

func (w *world) mark() mark {
	w.t.Helper()
	mc, found, err := w.tc.Get(w.t.Context(), w.ns, w.name)
	require.NoError(w.t, err)
	require.True(w.t, found)
	return mark{Generation: mc.Object.GetGeneration(), Version: mc.Version, Paused: mc.Paused, ValuesHash: mc.ValuesHash(),
		Annotations: mc.Object.GetAnnotations(), ResourceVersion: mc.Object.GetResourceVersion()}
}

// audit reads the API server's audit log.
type audit struct {
	w    *world
	seq  int
	seen int // events read before the current row
}

// start remembers where the log ends now.
func (a *audit) start() {
	a.w.t.Helper()
	a.seen = len(a.sync())
}

// sync makes a request of its own and waits until the log holds it, so
// every request answered before is in the log too; it returns the log.
func (a *audit) sync() []testenv.AuditEvent {
	a.w.t.Helper()
	a.seq++
	marker := fmt.Sprintf("audit-sentinel-%d", a.seq)
	_, err := a.w.env.Kube().CoreV1().ConfigMaps(a.w.ns).Get(a.w.t.Context(), marker, metav1.GetOptions{})
	require.True(a.w.t, apierrors.IsNotFound(err), "sentinel request: %v", err)
	deadline := time.Now().Add(30 * time.Second)
	for {
		events, err := testenv.ReadAuditLog(a.w.env.AuditLogPath())
		require.NoError(a.w.t, err)
		for i := len(events) - 1; i >= 0; i-- {
			if strings.Contains(events[i].RequestURI, marker) {
				return events
			}
		}
		require.True(a.w.t, time.Now().Before(deadline), "the audit log never showed %s", marker)
		time.Sleep(20 * time.Millisecond)
	}
}

// requests returns the requests chart-upgrader made since start: the
// writes (any verb but get, list and watch) and the number of reads.
func (a *audit) requests() (writes []string, reads int) {
	a.w.t.Helper()
	events := a.sync()
	for _, ev := range events[a.seen:] {
		if !strings.HasPrefix(ev.UserAgent, "chart-upgrader") {
			continue
		}
		switch {
		case ev.Verb == "get", ev.Verb == "list", ev.Verb == "watch":
			reads++
		case testenv.StoresNothing(ev.RequestURI): // the conflict check's dry runs and questions
		default:
			writes = append(writes, ev.Verb+" "+ev.RequestURI)
		}
	}
	return writes, reads
}

// entry is one entry of a test archive; typeflag 0 means a regular file.
type entry struct {
	name     string
	body     string
	typeflag byte
	linkname string
	size     int64 // the size the header claims, when not len(body)
}

// tgz builds a gzip-compressed tar archive of entries. An entry whose
// header claims more than its body ends the archive there (a truncated
// stream: what a reader sees of an archive that claims a huge file).
func tgz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hd := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typeflag, Linkname: e.linkname, ModTime: time.Unix(0, 0)}
		if hd.Typeflag == 0 {
			hd.Typeflag = tar.TypeReg
		}
		if hd.Typeflag == tar.TypeReg {
			hd.Size = int64(len(e.body))
			if e.size > 0 {
				hd.Size = e.size
			}
		}
		require.NoError(t, tw.WriteHeader(hd))
		if hd.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(e.body))
			require.NoError(t, err)
			if e.size > int64(len(e.body)) {
				require.NoError(t, zw.Close())
				return buf.Bytes()
			}
		}
	}
	require.NoError(t, tw.Close())
	require.NoError(t, zw.Close())
	return buf.Bytes()
}

// chartEntries are the files of the example chart at version, under the
// top directory "demo-app/" as `helm package` writes them, Chart.yaml first.
func (w *world) chartEntries(version string) []entry {
	w.t.Helper()
	dir := filepath.Join(w.root, "package", "examples", "charts", "demo-app-"+version)
	var out []entry
	require.NoError(w.t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out = append(out, entry{name: "demo-app/" + filepath.ToSlash(rel), body: string(body)})
		return nil
	}))
	sort.SliceStable(out, func(i, j int) bool {
		return out[i].name == "demo-app/Chart.yaml" && out[j].name != "demo-app/Chart.yaml"
	})
	return out
}

// chart is the example chart at version as an archive, with extra entries
// after its own files.
func (w *world) chart(version string, extra ...entry) []byte {
	w.t.Helper()
	return tgz(w.t, append(w.chartEntries(version), extra...)...)
}
