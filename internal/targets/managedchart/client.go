package managedchart

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Client reads and writes ManagedCharts and what Rancher and Fleet make of
// them.
type Client struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// Log receives what the watches have to say (a broken watch being
	// re-listed); nil discards it.
	Log *slog.Logger
	// RESTMapper maps the kinds of a release's objects: the cluster's,
	// which learns the kinds of CRDs applied during the run; nil: a
	// discovery of the client's own.
	RESTMapper meta.RESTMapper

	releasesOnce sync.Once
	releases     *helmrelease.Client
}

// Get reads a ManagedChart; found is false when it does not exist.
func (c *Client) Get(ctx context.Context, namespace, name string) (*ManagedChart, bool, error) {
	u, err := c.Dynamic.Resource(ManagedChartGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading managedchart %s/%s: %w", namespace, name, err)
	}
	mc, err := ParseManagedChart(u)
	return mc, err == nil, err
}

// Bundle reads Bundle mcc-<name>; nil when it does not exist.
func (c *Client) Bundle(ctx context.Context, namespace, managedChart string) (*Bundle, error) {
	u, err := c.Dynamic.Resource(BundleGVR).Namespace(namespace).Get(ctx, BundleName(managedChart), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading bundle %s/%s: %w", namespace, BundleName(managedChart), err)
	}
	return ParseBundle(u), nil
}

// ConfirmSample bounds the confirmation of a ready summary: one page of
// at most this many BundleDeployments. One is enough to prove a summary
// stale: Fleet's bundle controller writes every BundleDeployment's new
// deployment before the status it may write stale, and no agent has
// applied it then; each more costs its weight to read and decode
// (docs/design.md §4.2, docs/performance.md).
const ConfirmSample = 1

// BundleDeployments reads the BundleDeployments of a ManagedChart's
// Bundle: one list, by their labels, across the clusters' namespaces, of
// at most limit (0: all). all says whether that was every one.
func (c *Client) BundleDeployments(ctx context.Context, namespace, managedChart string, limit int64) (bds []BundleDeployment, all bool, err error) {
	list, err := c.Dynamic.Resource(BundleDeploymentGVR).List(ctx, metav1.ListOptions{LabelSelector: BundleSelector(namespace, managedChart), Limit: limit})
	if err != nil {
		return nil, false, fmt.Errorf("listing the bundledeployments of bundle %s/%s: %w", namespace, BundleName(managedChart), err)
	}
	out := make([]BundleDeployment, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, ParseBundleDeployment(&list.Items[i]))
	}
	return out, list.GetContinue() == "", nil
}

// BundleSelector selects the BundleDeployments of a ManagedChart's Bundle.
func BundleSelector(namespace, managedChart string) string {
	return labels.Set{LabelBundleName: BundleName(managedChart), LabelBundleNamespace: namespace}.String()
}

// Update is one write of a ManagedChart: the spec fields to set and the
// annotations to record.
type Update struct {
	Version     string
	Values      map[string]any
	Unpause     bool
	Annotations map[string]string
	// Spec, when set, replaces the whole spec (rollback); Version and Values
	// are then ignored.
	Spec map[string]any
}

// Apply writes the update with optimistic concurrency: it sends the
// resourceVersion it read, so a concurrent change fails it with a conflict
// (apierrors.IsConflict) instead of being overwritten.
func (c *Client) Apply(ctx context.Context, mc *ManagedChart, up Update) (*ManagedChart, error) {
	u := mc.Object.DeepCopy()
	if up.Spec != nil {
		u.Object["spec"] = up.Spec
	} else {
		if err := unstructured.SetNestedField(u.Object, up.Version, "spec", "version"); err != nil {
			return nil, err
		}
		if err := unstructured.SetNestedField(u.Object, jsonValues(up.Values), "spec", "values"); err != nil {
			return nil, fmt.Errorf("setting spec.values: %w", err)
		}
	}
	if up.Unpause {
		if err := unstructured.SetNestedField(u.Object, false, "spec", "paused"); err != nil {
			return nil, err
		}
	}
	u.SetAnnotations(specobject.Annotate(u.GetAnnotations(), up.Annotations))
	u.SetResourceVersion(mc.ResourceVersion)
	out, err := c.Dynamic.Resource(ManagedChartGVR).Namespace(mc.Namespace).Update(ctx, u, metav1.UpdateOptions{FieldManager: "chart-upgrader"})
	if err != nil {
		return nil, fmt.Errorf("updating managedchart %s/%s: %w", mc.Namespace, mc.Name, err)
	}
	return ParseManagedChart(out)
}

// jsonValues converts values to the types unstructured objects hold.
func jsonValues(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = jsonValues(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = jsonValues(e)
		}
		return out
	default:
		return v
	}
}

// BackupName is the Secret holding a ManagedChart's spec before an upgrade
// from fromVersion (docs/design.md §4.2).
func BackupName(managedChart, fromVersion string) string {
	return Descriptor.BackupName(managedChart, fromVersion)
}

// LabelBackupOf labels a backup Secret with the name of its target.
const LabelBackupOf = specobject.LabelBackupOf

// backupObject is the ManagedChart as its backup keeps it.
func backupObject(mc *ManagedChart) specobject.Object {
	spec, _ := mc.Object.Object["spec"].(map[string]any)
	return specobject.Object{Kind: Descriptor, Namespace: mc.Namespace, Name: mc.Name,
		Version: mc.Version, Spec: spec, Annotations: mc.Annotations}
}

// Observed is the ManagedChart as the upgrade core sees it; nil for nil.
func (m *ManagedChart) Observed() *upgrade.Observed {
	if m == nil {
		return nil
	}
	o := &upgrade.Observed{Chart: m.Chart, Version: m.Version, Values: m.Values, ValuesHash: m.ValuesHash(),
		Paused: m.Paused, PausedByUs: m.PausedByUs(), Source: m,
		Applied: specobject.Record(m.Annotations)}
	if m.Object != nil {
		o.UID = string(m.Object.GetUID())
	}
	return o
}

// Releases reads the Helm releases Fleet's agent deploys (on the local
// cluster, where this process runs).
func (c *Client) Releases() *helmrelease.Client {
	c.releasesOnce.Do(func() {
		c.releases = &helmrelease.Client{Kube: c.Kube, Dynamic: c.Dynamic, Log: c.Log, RESTMapper: c.RESTMapper}
	})
	return c.releases
}
