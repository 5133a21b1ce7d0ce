package managedchart

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

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
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range up.Annotations {
		if v == "" {
			delete(ann, k)
			continue
		}
		ann[k] = v
	}
	u.SetAnnotations(ann)
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

// BackupName is the Secret holding a target's spec before an upgrade from
// fromVersion (docs/design.md §4.2).
func BackupName(managedChart, fromVersion string) string {
	name := "chart-upgrader-backup-" + managedChart + "-" + sanitize(fromVersion)
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.TrimRight(name, "-.")
}

func sanitize(s string) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Backup keys and labels.
const (
	BackupKeySpec       = "spec.yaml"
	BackupKeyAnnotation = "annotations.yaml"
	LabelBackupOf       = "chart-upgrader.io/backup-of"
	LabelBackupVersion  = "chart-upgrader.io/backup-version"
)

// EnsureBackup writes the whole spec of the ManagedChart into its backup
// Secret, once: when the Secret exists it is left as it is, so a re-run
// never replaces the spec from before the first attempt. created says
// whether this call wrote it.
func (c *Client) EnsureBackup(ctx context.Context, mc *ManagedChart) (created bool, err error) {
	name := BackupName(mc.Name, mc.Version)
	secrets := c.Kube.CoreV1().Secrets(mc.Namespace)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return false, nil
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading backup secret %s/%s: %w", mc.Namespace, name, err)
	}
	spec, err := yaml.Marshal(mc.Object.Object["spec"])
	if err != nil {
		return false, fmt.Errorf("encoding the spec of %s: %w", mc.Ref(), err)
	}
	ann, err := yaml.Marshal(mc.Annotations)
	if err != nil {
		return false, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mc.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader",
				LabelBackupOf: mc.Name, LabelBackupVersion: sanitize(mc.Version)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{BackupKeySpec: spec, BackupKeyAnnotation: ann},
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("writing backup secret %s/%s: %w", mc.Namespace, name, err)
	}
	return true, nil
}

// Backup is a saved spec.
type Backup struct {
	Name        string
	Version     string
	Spec        map[string]any
	Annotations map[string]string
	Created     metav1.Time
}

// ReadBackup reads the backup of the ManagedChart from fromVersion; when
// fromVersion is empty, the newest backup of it.
func (c *Client) ReadBackup(ctx context.Context, namespace, managedChart, fromVersion string) (*Backup, error) {
	secrets := c.Kube.CoreV1().Secrets(namespace)
	var s *corev1.Secret
	if fromVersion != "" {
		got, err := secrets.Get(ctx, BackupName(managedChart, fromVersion), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading backup secret %s/%s: %w", namespace, BackupName(managedChart, fromVersion), err)
		}
		s = got
	} else {
		list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: LabelBackupOf + "=" + managedChart})
		if err != nil {
			return nil, fmt.Errorf("listing backups of %s/%s: %w", namespace, managedChart, err)
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("no backup of managedchart %s/%s", namespace, managedChart)
		}
		sort.Slice(list.Items, func(i, j int) bool {
			return list.Items[i].CreationTimestamp.Before(&list.Items[j].CreationTimestamp)
		})
		s = &list.Items[len(list.Items)-1]
	}
	var spec map[string]any
	if err := yaml.Unmarshal(s.Data[BackupKeySpec], &spec); err != nil {
		return nil, fmt.Errorf("backup secret %s/%s: %s is corrupt: %w", namespace, s.Name, BackupKeySpec, err)
	}
	var ann map[string]string
	_ = yaml.Unmarshal(s.Data[BackupKeyAnnotation], &ann)
	version, _ := spec["version"].(string)
	return &Backup{Name: s.Name, Version: version, Spec: spec, Annotations: ann, Created: s.CreationTimestamp}, nil
}

// PendingRelease returns the status of the newest Helm release record of
// release in namespace when it is pending-install, pending-upgrade or
// pending-rollback; "" otherwise.
func (c *Client) PendingRelease(ctx context.Context, namespace, release string) (string, error) {
	list, err := c.Kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{"owner": "helm", "name": release}.String()})
	if err != nil {
		return "", fmt.Errorf("listing helm release records of %s/%s: %w", namespace, release, err)
	}
	newest, status := -1, ""
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		if err != nil || v <= newest {
			continue
		}
		newest, status = v, s.Labels["status"]
	}
	if strings.HasPrefix(status, "pending") {
		return status, nil
	}
	return "", nil
}

// Look reads the Bundle and BundleDeployments of a ManagedChart once, for a
// readiness judgement without a watch: two requests, the list decoded as
// it arrives (only what readiness reads of each BundleDeployment is kept).
func (c *Client) Look(ctx context.Context, mc *ManagedChart) (*Bundle, []BundleDeployment, error) {
	b, err := c.Bundle(ctx, mc.Namespace, mc.Name)
	if err != nil {
		return nil, nil, err
	}
	bds, err := c.BundleDeployments(ctx, mc)
	return b, bds, err
}

// BundleDeployments lists the BundleDeployments of a ManagedChart's Bundle
// in one request, decoded as the list arrives (only what readiness reads
// of each is kept).
func (c *Client) BundleDeployments(ctx context.Context, mc *ManagedChart) ([]BundleDeployment, error) {
	var bds []BundleDeployment
	if _, err := c.listBundleDeployments(ctx, metav1.ListOptions{LabelSelector: BundleSelector(mc.Namespace, mc.Name)},
		func(it bdItem) { bds = append(bds, it.BD) }); err != nil {
		return nil, fmt.Errorf("listing bundledeployments of %s: %w", BundleName(mc.Name), err)
	}
	return bds, nil
}

// Observed is the ManagedChart as the upgrade core sees it; nil for nil.
func (m *ManagedChart) Observed() *upgrade.Observed {
	if m == nil {
		return nil
	}
	o := &upgrade.Observed{Chart: m.Chart, Version: m.Version, Values: m.Values, ValuesHash: m.ValuesHash(),
		Paused: m.Paused, PausedByUs: m.PausedByUs(), Source: m,
		Applied: upgrade.Record{Version: m.Annotations[AnnotationVersion], ValuesHash: m.Annotations[AnnotationValuesHash],
			AppliedAt: m.Annotations[AnnotationAppliedAt], PreviousVersion: m.Annotations[AnnotationPreviousVersion]}}
	if m.Object != nil {
		o.UID = string(m.Object.GetUID())
	}
	return o
}
