package helmchart

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Client reads and writes HelmCharts and what helm-controller makes of
// them.
type Client struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	// Log receives what the watches have to say; nil discards it.
	Log *slog.Logger
	// RESTMapper maps the kinds of a release's objects: the cluster's,
	// which learns the kinds of CRDs applied during the run; nil: a
	// discovery of the client's own.
	RESTMapper meta.RESTMapper

	releasesOnce sync.Once
	releases     *helmrelease.Client
}

// Releases reads the Helm releases HelmCharts deploy, and their objects.
func (c *Client) Releases() *helmrelease.Client {
	c.releasesOnce.Do(func() {
		c.releases = &helmrelease.Client{Kube: c.Kube, Dynamic: c.Dynamic, Log: c.Log, RESTMapper: c.RESTMapper}
	})
	return c.releases
}

// Get reads a HelmChart; nil when it does not exist.
func (c *Client) Get(ctx context.Context, namespace, name string) (*HelmChart, error) {
	u, err := c.Dynamic.Resource(HelmChartGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading helmchart %s/%s: %w", namespace, name, err)
	}
	h, err := ParseHelmChart(u)
	if err != nil {
		return nil, outcome.BadInput(err)
	}
	return h, nil
}

// Config reads the HelmChartConfig of the same name; nil when there is
// none.
func (c *Client) Config(ctx context.Context, namespace, name string) (*HelmChartConfig, error) {
	u, err := c.Dynamic.Resource(HelmChartConfigGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading helmchartconfig %s/%s: %w", namespace, name, err)
	}
	cfg, err := ParseHelmChartConfig(u)
	if err != nil {
		return nil, outcome.BadInput(err)
	}
	return cfg, nil
}

// Overlay is what klipper-helm lays over the HelmChart's own values files
// (docs/helmchart.md#values): the HelmChart's valuesSecrets, then the
// HelmChartConfig's valuesContent, values and valuesSecrets. from names
// them; it is empty when there is nothing. Paths a spec.set entry sets are
// left out: Helm applies the set flags after every values file.
func (c *Client) Overlay(ctx context.Context, h *HelmChart, cfg *HelmChartConfig) (over map[string]any, from string, err error) {
	over = map[string]any{}
	var names []string
	add := func(m map[string]any, name string) {
		if len(m) > 0 {
			over = values.Overlay(over, m)
			names = append(names, name)
		}
	}
	for _, ref := range h.ValuesSecrets {
		m, err := c.secretValues(ctx, h.Namespace, ref)
		if err != nil {
			return nil, "", err
		}
		add(m, "secret "+h.Namespace+"/"+ref.Name)
	}
	if cfg != nil {
		m, err := ConfigValues(cfg)
		if err != nil {
			return nil, "", err
		}
		add(m, "HelmChartConfig "+cfg.Namespace+"/"+cfg.Name)
		for _, ref := range cfg.ValuesSecrets {
			m, err := c.secretValues(ctx, h.Namespace, ref)
			if err != nil {
				return nil, "", err
			}
			add(m, "secret "+h.Namespace+"/"+ref.Name)
		}
	}
	for _, e := range h.Set {
		if keys, ok := simpleSetPath(e); ok {
			remove(over, keys)
		}
	}
	if len(over) == 0 {
		return nil, "", nil
	}
	return over, strings.Join(names, ", "), nil
}

// secretValues reads the values files a valuesSecrets entry names, in
// the order of its keys.
func (c *Client) secretValues(ctx context.Context, namespace string, ref SecretRef) (map[string]any, error) {
	if len(ref.Keys) == 0 || ref.Name == "" {
		return nil, nil
	}
	s, err := c.Kube.CoreV1().Secrets(namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil // helm-controller mounts it optional only with ignoreUpdates; its Job fails otherwise
	}
	if err != nil {
		return nil, fmt.Errorf("reading values secret %s/%s: %w", namespace, ref.Name, err)
	}
	out := map[string]any{}
	for _, k := range ref.Keys {
		data, ok := s.Data[k]
		if !ok {
			continue
		}
		m, err := values.Parse(data)
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("values secret %s/%s key %s: %w", namespace, ref.Name, k, err))
		}
		out = values.Overlay(out, m)
	}
	return out, nil
}

// ChartOf is the chart a HelmChart's spec.chartContent carries; nil when
// it carries none.
func ChartOf(h *HelmChart) (*chart.Chart, error) {
	if h.ChartContent == "" {
		return nil, nil
	}
	data, err := base64.StdEncoding.DecodeString(strings.TrimSpace(h.ChartContent))
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s spec.chartContent: not base64: %w", h.Ref(), err))
	}
	ch, err := loader.LoadArchive(bytes.NewReader(data))
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("%s spec.chartContent: not a chart archive: %w", h.Ref(), err))
	}
	return ch, nil
}

// Update is one write of a HelmChart.
type Update struct {
	Version       string
	ValuesContent string
	Set           []SetEntry
	ChartContent  string // set only for a HelmChart that carries its chart
	// FailurePolicy is written in spec.failurePolicy when set.
	FailurePolicy string
	// ServerSide is written in spec.serverSide when set; ForceConflicts,
	// when true, in spec.forceConflicts (apply:).
	ServerSide     string
	ForceConflicts bool
	Annotations    map[string]string
	// Spec, when set, replaces the whole spec (rollback).
	Spec map[string]any
}

// Apply writes up with the resourceVersion h was read at: a concurrent
// change fails it with a conflict.
func (c *Client) Apply(ctx context.Context, h *HelmChart, up Update, annotate func(map[string]string) map[string]string) (*HelmChart, error) {
	u := h.Object.DeepCopy()
	if up.Spec != nil {
		u.Object["spec"] = up.Spec
	} else {
		spec, _ := u.Object["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
		}
		spec["version"] = up.Version
		if up.ValuesContent == "" {
			delete(spec, "valuesContent")
		} else {
			spec["valuesContent"] = up.ValuesContent
		}
		delete(spec, "values") // folded into valuesContent
		if len(up.Set) == 0 {
			delete(spec, "set")
		} else {
			set := map[string]any{}
			for _, e := range up.Set {
				set[e.Key] = e.Value
			}
			spec["set"] = set
		}
		if up.ChartContent != "" {
			spec["chartContent"] = up.ChartContent
		}
		if up.FailurePolicy != "" {
			spec["failurePolicy"] = up.FailurePolicy
		}
		if up.ServerSide != "" {
			spec["serverSide"] = up.ServerSide
		}
		if up.ForceConflicts {
			spec["forceConflicts"] = true
		}
		u.Object["spec"] = spec
	}
	u.SetAnnotations(annotate(u.GetAnnotations()))
	u.SetResourceVersion(h.ResourceVersion)
	out, err := c.Dynamic.Resource(HelmChartGVR).Namespace(h.Namespace).Update(ctx, u, metav1.UpdateOptions{FieldManager: "chart-upgrader"})
	if err != nil {
		return nil, fmt.Errorf("updating helmchart %s/%s: %w", h.Namespace, h.Name, err)
	}
	return ParseHelmChart(out)
}

// NewestRelease reads the newest revision of the HelmChart's release, as
// Helm stores it; nil when there is none.
func (c *Client) NewestRelease(_ context.Context, h *HelmChart) (*release.Release, error) {
	return c.Releases().Newest(h.TargetNamespace, h.ReleaseName(), h.Driver)
}

// ReleaseOf is what readiness uses of a release revision.
func ReleaseOf(r *release.Release) *Release {
	if r == nil {
		return nil
	}
	out := &Release{Namespace: r.Namespace, Name: r.Name, Revision: r.Version, ConfigHash: r.Labels[KeyConfigHash]}
	if r.Info != nil {
		out.Status = r.Info.Status
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		out.ChartVersion = r.Chart.Metadata.Version
	}
	return out
}

// Job reads the HelmChart's Job; nil when it does not exist.
func (c *Client) Job(ctx context.Context, h *HelmChart) (*batchv1.Job, error) {
	j, err := c.Kube.BatchV1().Jobs(h.Namespace).Get(ctx, JobName(h.Name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading job %s/%s: %w", h.Namespace, JobName(h.Name), err)
	}
	return j, nil
}

// ValuesSecret reads the data of the values Secret helm-controller
// writes; nil when it does not exist.
func (c *Client) ValuesSecret(ctx context.Context, h *HelmChart) (map[string][]byte, error) {
	s, err := c.Kube.CoreV1().Secrets(h.Namespace).Get(ctx, ValuesSecretName(h.Name), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", h.Namespace, ValuesSecretName(h.Name), err)
	}
	return secretData(s), nil
}

// secretData is a Secret's data, never nil for an existing Secret.
func secretData(s *corev1.Secret) map[string][]byte {
	if s.Data == nil {
		return map[string][]byte{}
	}
	return s.Data
}

// PodFailures counts the failed runs of the Job's pods and returns the
// termination message of the newest; nothing while the Job runs cleanly.
func (c *Client) PodFailures(ctx context.Context, job *batchv1.Job) (int, string, error) {
	if job == nil {
		return 0, "", nil
	}
	pods, err := c.Kube.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{"job-name": job.Name}.String()})
	if err != nil {
		return 0, "", fmt.Errorf("listing the pods of job %s/%s: %w", job.Namespace, job.Name, err)
	}
	n, msg := podFailures(job, pods.Items)
	return n, msg, nil
}

// podFailures counts the failed runs of job's pods: each restart of a
// container (helm-controller's Jobs restart OnFailure) and each failed
// pod; message is the termination message of the newest failed run.
func podFailures(job *batchv1.Job, pods []corev1.Pod) (n int, message string) {
	var newest metav1.Time
	for i := range pods {
		p := &pods[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		if p.Status.Phase == corev1.PodFailed {
			n++
		}
		for _, cs := range p.Status.ContainerStatuses {
			n += int(cs.RestartCount)
			for _, st := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
				if t := st.Terminated; t != nil && t.ExitCode != 0 && !t.FinishedAt.Before(&newest) {
					newest, message = t.FinishedAt, t.Message
				}
			}
		}
	}
	return n, message
}

// unstructuredSpec is a copy of the object's spec.
func unstructuredSpec(u *unstructured.Unstructured) map[string]any {
	spec, _ := u.DeepCopy().Object["spec"].(map[string]any)
	return spec
}

// specObject is a HelmChart object with spec, for parsing a backup.
func specObject(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}
