// Package kubecompat checks every Helm release on the cluster against the
// next Kubernetes version, before the nodes move to it: the deployed
// chart's kubeVersion with Helm's own constraint check, the deployed
// manifest's API versions that the version no longer serves (Kubernetes'
// own removal data, k8s.io/api's prerelease lifecycle), and, for charts
// whose templates read .Capabilities, the chart rendered with the new
// version (kinds it would then render that are not served, objects that
// would appear or disappear). For a failing release whose chart source is
// known it names the lowest chart version at or above the deployed one
// that fits both today's server and the next version. It writes nothing.
package kubecompat

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
	common "helm.sh/helm/v4/pkg/chart/common"
	helmchart "helm.sh/helm/v4/pkg/chart/v2"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
)

// Version is a Kubernetes version the check is for.
type Version struct {
	// Written is as given ("v1.33.5+rke2r1").
	Written string
	// Kube is the Kubernetes version it is (1.33.5).
	Kube *semver.Version
}

// distribution is a k3s or RKE2 version's build suffix: v1.33.5+k3s1,
// v1.33.5+rke2r1 are Kubernetes 1.33.5.
var distribution = regexp.MustCompile(`\+(k3s|rke2r)\d+$`)

// ParseVersion reads V: a Kubernetes version (1.34, v1.34.2) or a k3s or
// RKE2 one (v1.34.2+k3s1, v1.34.2+rke2r1). Anything else is bad input.
func ParseVersion(v string) (Version, error) {
	s := distribution.ReplaceAllString(strings.TrimSpace(v), "")
	sv, err := semver.NewVersion(s)
	if err != nil || sv.Major() != 1 || sv.Prerelease() != "" || sv.Metadata() != "" {
		return Version{}, outcome.BadInput(fmt.Errorf("--kube-version %q: not a Kubernetes version (1.34, v1.34.2, or a k3s or RKE2 one: v1.34.2+k3s1, v1.34.2+rke2r1)", v))
	}
	return Version{Written: v, Kube: sv}, nil
}

// String is the Kubernetes version, v1.34.2.
func (v Version) String() string { return "v" + v.Kube.String() }

// Options are one check's.
type Options struct {
	Target Version
	// Current is the server's version today.
	Current Version
	// Sources are chart sources by release (namespace/name), given by
	// the user (--release-source); the chart source an object that
	// deploys a release names is found on its own.
	Sources map[string]string
	// Targets are an upgrade spec's targets and chart sources (--spec):
	// a target is matched to the release its object deploys, else to the
	// release of its own namespace and name.
	Targets []TargetSource
}

// TargetSource is one chart of an upgrade spec: its target and where its
// chart comes from.
type TargetSource struct {
	// Object is the target as kind.Deployed names a deploying object
	// ("<Spelling> ns/name"); Namespace/Name its namespace and name.
	Object, Namespace, Name string
	Source, Chart           string
}

// Finding is one thing that breaks.
type Finding struct {
	// What: "kubeVersion", "removed API", "renders unserved".
	What string `json:"what"`
	Why  string `json:"why"`
}

// ReleaseReport is one release's verdict.
type ReleaseReport struct {
	Release   string    `json:"release"` // namespace/name
	Kind      string    `json:"kind"`    // "helm release", "HelmChart ns/name", "ManagedChart ns/name"
	Chart     string    `json:"chart"`   // name-version
	Findings  []Finding `json:"findings,omitempty"`
	Appear    []string  `json:"appear,omitempty"`    // objects rendered at the target and not deployed
	Disappear []string  `json:"disappear,omitempty"` // deployed and not rendered at the target
	// When says when it breaks: at the next helm upgrade, the next
	// helm-controller run, the next Fleet redeploy.
	When string `json:"when,omitempty"`
	// Forward is the way forward: the chart version to upgrade to first,
	// or why there is none.
	Forward string `json:"forward,omitempty"`
	// Rendered: the chart was rendered at the target (its templates read
	// .Capabilities).
	Rendered bool `json:"rendered"`
}

// Report is the check's verdict.
type Report struct {
	Target   string          `json:"target"`
	Current  string          `json:"current"`
	Checked  int             `json:"checked"`
	Rendered int             `json:"rendered"`
	Failing  []ReleaseReport `json:"failing"`
	// NotChecked says what could not be read.
	NotChecked []string `json:"notChecked,omitempty"`
	// RemovalData names the data of removed APIs and its newest version.
	RemovalData string `json:"removalData"`
}

// Err is nil when every release passes, else a refusal naming each.
func (r *Report) Err() error {
	if len(r.Failing) == 0 {
		return nil
	}
	var parts []string
	for _, f := range r.Failing {
		var whys []string
		for _, x := range f.Findings {
			whys = append(whys, x.Why)
		}
		parts = append(parts, fmt.Sprintf("%s (%s, %s): %s; breaks %s; %s", f.Release, f.Kind, f.Chart, strings.Join(whys, "; "), f.When, f.Forward))
	}
	return outcome.Refused(fmt.Errorf("%d of %d release(s) would break on Kubernetes %s: %s", len(r.Failing), r.Checked, r.Target, strings.Join(parts, " | ")))
}

// Clients are what the check reads with.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Check checks every deployed release the clients may read.
func Check(ctx context.Context, c Clients, opts Options) (*Report, error) {
	rep := &Report{Target: opts.Target.String(), Current: opts.Current.String(), Failing: []ReleaseReport{}, RemovalData: removalData}
	rels, bad, err := deployed(ctx, c, rep)
	if err != nil {
		return nil, err
	}
	for _, u := range bad {
		rep.Checked++
		rep.Failing = append(rep.Failing, ReleaseReport{Release: u.release, Kind: "helm release", Chart: "(unknown)",
			Findings: []Finding{{What: "unreadable", Why: fmt.Sprintf("its stored record %s does not decode (%s): Helm cannot read it either", u.record, u.err)}},
			When:     "now: Helm skips it when it lists releases and fails on it when it reads it", Forward: "restore or remove the record"})
	}
	owners, err := owningObjects(ctx, c, rep)
	if err != nil {
		return nil, err
	}
	for _, rel := range rels {
		rr := checkRelease(ctx, rel, opts, owners)
		rep.Checked++
		if rr.Rendered {
			rep.Rendered++
		}
		if len(rr.Findings) > 0 {
			rep.Failing = append(rep.Failing, rr)
		}
	}
	sort.Slice(rep.Failing, func(i, j int) bool { return rep.Failing[i].Release < rep.Failing[j].Release })
	return rep, nil
}

// unreadable is a release record that does not decode.
type unreadable struct {
	release, record, err string
}

// record is one release record of Helm's storage.
type record struct {
	namespace, name string
	labels          map[string]string
	data            string
}

// storages are Helm's storage drivers, each listed the same way.
var storages = []struct {
	name string
	list func(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) ([]record, error)
}{
	{"secret", func(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) ([]record, error) {
		l, err := c.Kube.CoreV1().Secrets(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out := make([]record, len(l.Items))
		for i, s := range l.Items {
			out[i] = record{s.Namespace, s.Name, s.Labels, string(s.Data["release"])}
		}
		return out, nil
	}},
	{"configmap", func(ctx context.Context, c Clients, namespace string, opts metav1.ListOptions) ([]record, error) {
		l, err := c.Kube.CoreV1().ConfigMaps(namespace).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		out := make([]record, len(l.Items))
		for i, m := range l.Items {
			out[i] = record{m.Namespace, m.Name, m.Labels, m.Data["release"]}
		}
		return out, nil
	}},
}

// deployed lists the deployed revision of every release, Helm's secret
// and configmap storage, one LIST each in every namespace (where the RBAC
// allows no list across namespaces: one in each namespace it may read),
// and decodes each record as Helm does (Helm's own Query skips a record
// that does not decode without a word: it is named here).
func deployed(ctx context.Context, c Clients, rep *Report) ([]*release.Release, []unreadable, error) {
	selector := metav1.ListOptions{LabelSelector: "owner=helm,status=deployed"}
	var records []record
	var namespaces []string // listed once, when a storage cannot be listed across namespaces
	readable := 0
	for _, st := range storages {
		rs, err := st.list(ctx, c, "", selector)
		if err == nil {
			records = append(records, rs...)
			readable++
			continue
		}
		if !apierrors.IsForbidden(err) {
			return nil, nil, fmt.Errorf("listing the releases in Helm's %s storage: %w", st.name, err)
		}
		if namespaces == nil {
			l, nerr := c.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if nerr != nil {
				rep.NotChecked = append(rep.NotChecked, fmt.Sprintf("the releases in Helm's %s storage: this process may list them in no namespace it can name (%v; listing the namespaces: %v)", st.name, err, nerr))
				continue
			}
			namespaces = []string{}
			for _, n := range l.Items {
				namespaces = append(namespaces, n.Name)
			}
		}
		var refused []string
		for _, ns := range namespaces {
			rs, err := st.list(ctx, c, ns, selector)
			switch {
			case apierrors.IsForbidden(err):
				refused = append(refused, ns)
			case err != nil:
				return nil, nil, fmt.Errorf("listing the releases in Helm's %s storage of namespace %s: %w", st.name, ns, err)
			default:
				records = append(records, rs...)
			}
		}
		if len(refused) < len(namespaces) {
			readable++
		}
		if len(refused) > 0 {
			names := strings.Join(refused, ", ")
			if len(refused) > 10 {
				names = fmt.Sprintf("%s and %d more", strings.Join(refused[:10], ", "), len(refused)-10)
			}
			rep.NotChecked = append(rep.NotChecked, fmt.Sprintf("the releases in Helm's %s storage of %d namespace(s) (%s): this process may not list them", st.name, len(refused), names))
		}
	}
	if readable == 0 {
		return nil, nil, fmt.Errorf("reading Helm's release storage: this process may list neither the secrets nor the configmaps of any namespace (add list on secrets, where Helm keeps releases, to its RBAC): %s", strings.Join(rep.NotChecked, "; "))
	}
	var out []*release.Release
	var bad []unreadable
	for _, r := range records {
		rel, err := helmrelease.Decode(r.data)
		if err != nil {
			bad = append(bad, unreadable{release: r.namespace + "/" + r.labels["name"], record: r.namespace + "/" + r.name, err: err.Error()})
			continue
		}
		out = append(out, rel)
	}
	return out, bad, nil
}

// RBAC are the rules the check needs: list Helm's release storage in
// every namespace (secrets hold every release's values: the role reads
// them all), and the objects of the kinds that deploy releases.
func RBAC() []rbacv1.PolicyRule {
	return append([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"list"}}},
		targets.DeployedReleasesRBAC()...)
}

// owningObjects finds the releases objects of a kind deploy (HelmCharts,
// ManagedCharts: the kinds' registry), by release namespace/name.
func owningObjects(ctx context.Context, c Clients, rep *Report) (map[string]kind.Deployed, error) {
	if c.Dynamic == nil {
		return map[string]kind.Deployed{}, nil
	}
	out, notRead, err := targets.DeployedReleases(ctx, c.Dynamic)
	rep.NotChecked = append(rep.NotChecked, notRead...)
	return out, err
}

// checkRelease is one release's verdict.
func checkRelease(ctx context.Context, rel *release.Release, opts Options, owners map[string]kind.Deployed) ReleaseReport {
	key := rel.Namespace + "/" + rel.Name
	rr := ReleaseReport{Release: key, Kind: "helm release", When: "at its next helm upgrade (or rollback)"}
	if o, ok := owners[key]; ok {
		rr.Kind, rr.When = o.Object, o.When
	}
	if rel.Chart == nil || rel.Chart.Metadata == nil {
		return rr
	}
	rr.Chart = rel.Chart.Metadata.Name + "-" + rel.Chart.Metadata.Version
	if kv := rel.Chart.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, opts.Target.String()) {
		rr.Findings = append(rr.Findings, Finding{What: "kubeVersion", Why: fmt.Sprintf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", kv, opts.Target)})
	}
	deployedObjs, _ := manifest.Objects(rel.Manifest)
	for _, o := range deployedObjs {
		if at, ok := removedAt(o.GroupVersionKind(), opts.Target); ok {
			rr.Findings = append(rr.Findings, Finding{What: "removed API", Why: fmt.Sprintf(
				"the deployed manifest holds %s %s at %s, removed in Kubernetes %s (\"current release manifest contains removed kubernetes api(s)\")", o.GetKind(), name(o), o.GetAPIVersion(), at)})
		}
	}
	if readsCapabilities(rel) {
		rr.Rendered = true
		renderedObjs, err := renderAt(rel, opts.Target)
		if err != nil {
			rr.Findings = append(rr.Findings, Finding{What: "render", Why: fmt.Sprintf("the deployed chart and values do not render at Kubernetes %s: %v", opts.Target, err)})
		} else {
			for _, o := range renderedObjs {
				if at, ok := removedAt(o.GroupVersionKind(), opts.Target); ok {
					rr.Findings = append(rr.Findings, Finding{What: "renders unserved", Why: fmt.Sprintf(
						"rendered at Kubernetes %s, the chart makes %s %s at %s, removed in Kubernetes %s", opts.Target, o.GetKind(), name(o), o.GetAPIVersion(), at)})
				}
			}
			rr.Appear, rr.Disappear = difference(deployedObjs, renderedObjs)
		}
	}
	if len(rr.Findings) > 0 {
		rr.Forward = forward(ctx, rel, opts, owners[key], specSource(opts.Targets, key, owners))
		for _, f := range rr.Findings {
			if f.What == "removed API" {
				rr.Forward = "map the stored manifest's removed APIs first (helm cannot upgrade a release whose stored manifest it cannot build: chart-upgrader's release.mapRemovedAPIs, or the helm-mapkubeapis plugin); then " + rr.Forward
				break
			}
		}
	}
	return rr
}

// readsCapabilities: a template of the chart (or a subchart) reads
// .Capabilities, so its rendering may change with the version.
func readsCapabilities(rel *release.Release) bool {
	var walk func(c *helmchart.Chart) bool
	walk = func(c *helmchart.Chart) bool {
		for _, t := range c.Templates {
			if strings.Contains(string(t.Data), ".Capabilities") {
				return true
			}
		}
		for _, d := range c.Dependencies() {
			if walk(d) {
				return true
			}
		}
		return false
	}
	return walk(rel.Chart)
}

// renderAt renders the deployed chart with the deployed values, as Helm
// would at version v.
func renderAt(rel *release.Release, v Version) ([]*unstructured.Unstructured, error) {
	r := chart.Renderer{Capabilities: capabilitiesAt(v)}
	out, err := r.Manifest(rel.Chart, rel.Config, rel.Name, rel.Namespace)
	if err != nil {
		return nil, err
	}
	return manifest.Objects(out)
}

// capabilitiesAt are Helm's default capabilities with KubeVersion v.
func capabilitiesAt(v Version) func() (*common.Capabilities, error) {
	return func() (*common.Capabilities, error) {
		caps := common.DefaultCapabilities.Copy()
		caps.KubeVersion = common.KubeVersion{Version: v.String(), Major: fmt.Sprint(v.Kube.Major()), Minor: fmt.Sprint(v.Kube.Minor())}
		return caps, nil
	}
}

// difference names the objects rendered and not deployed, and deployed
// and not rendered, by kind, namespace and name.
func difference(deployedObjs, rendered []*unstructured.Unstructured) (appear, disappear []string) {
	key := func(o *unstructured.Unstructured) string { return o.GetKind() + " " + name(o) }
	have := map[string]bool{}
	for _, o := range deployedObjs {
		have[key(o)] = true
	}
	will := map[string]bool{}
	for _, o := range rendered {
		will[key(o)] = true
		if !have[key(o)] {
			appear = append(appear, key(o))
		}
	}
	for _, o := range deployedObjs {
		if !will[key(o)] {
			disappear = append(disappear, key(o))
		}
	}
	return appear, disappear
}

func name(o *unstructured.Unstructured) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

// removedAt: Kubernetes' own lifecycle of the built-in type gvk
// (k8s.io/api's generated APILifecycleRemoved) says it is removed at or
// before v, and at which version.
func removedAt(gvk schema.GroupVersionKind, v Version) (string, bool) {
	obj, err := scheme.Scheme.New(gvk)
	if err != nil {
		return "", false // not a built-in kind this data knows
	}
	r, ok := obj.(interface{ APILifecycleRemoved() (int, int) })
	if !ok {
		return "", false
	}
	major, minor := r.APILifecycleRemoved()
	if major == 0 {
		return "", false
	}
	at := semver.New(uint64(major), uint64(minor), 0, "", "")
	if v.Kube.LessThan(at) {
		return "", false
	}
	return fmt.Sprintf("%d.%d", major, minor), true
}

// specSource is the spec's chart for release key: the target whose
// object deploys it, else the target of its namespace and name.
func specSource(targets []TargetSource, key string, owners map[string]kind.Deployed) *TargetSource {
	o, deployed := owners[key]
	for i, t := range targets {
		if deployed && t.Object == o.Object || !deployed && t.Namespace+"/"+t.Name == key {
			return &targets[i]
		}
	}
	return nil
}
