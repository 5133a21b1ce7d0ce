package helmrelease

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"

	"helm.sh/helm/v4/pkg/storage/driver"

	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretName is the name of the Secret Helm's Secrets driver keeps
// revision version of release name in.
func SecretName(name string, version int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", name, version)
}

// Encode encodes a release record as Helm's storage drivers write it:
// base64 of gzipped JSON (the inverse of Decode).
func Encode(rel *release.Release) (string, error) {
	b, err := json.Marshal(rel)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(b); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

// Pending is a revision left pending-install, pending-upgrade or
// pending-rollback, with what its Secret says of it.
type Pending struct {
	Release *release.Release
	Since   time.Time // when the operation began (Info.LastDeployed)
	// secret is its record as read: MarkFailed writes only over it
	secret *corev1.Secret
}

// ResourceVersion is the resourceVersion its record was read at.
func (p *Pending) ResourceVersion() string { return p.secret.ResourceVersion }

// IsPending reports whether a revision's status is pending-*.
func IsPending(rel *release.Release) bool {
	return rel != nil && rel.Info != nil && rel.Info.Status.IsPending()
}

// ReadPending reads the Secret of revision rel (which was pending) for its
// resourceVersion; nil when it no longer holds that revision pending (the
// operation ended meanwhile: read the release again).
func (c *Client) ReadPending(ctx context.Context, rel *release.Release) (*Pending, error) {
	s, now, err := c.readRecord(ctx, rel)
	if err != nil {
		return nil, err
	}
	if !IsPending(now) {
		return nil, nil
	}
	// a revision's own labels are not in its record: Helm's driver keeps
	// them as the Secret's labels, beside its own
	now.Labels = map[string]string{}
	for k, v := range s.Labels {
		if !slices.Contains(driver.GetSystemLabels(), k) {
			now.Labels[k] = v
		}
	}
	p := &Pending{Release: now, secret: s}
	if now.Info != nil {
		p.Since = now.Info.LastDeployed
	}
	return p, nil
}

// readRecord reads the Secret that holds revision rel's record, and the
// record it holds now.
func (c *Client) readRecord(ctx context.Context, rel *release.Release) (*corev1.Secret, *release.Release, error) {
	s, err := c.Kube.CoreV1().Secrets(rel.Namespace).Get(ctx, SecretName(rel.Name, rel.Version), metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("reading the record of helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	now, err := Decode(string(s.Data["release"]))
	if err != nil {
		return nil, nil, fmt.Errorf("decoding the record of helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	return s, now, nil
}

// ErrPendingChanged: the pending revision's Secret changed since it was
// read; MarkFailed wrote nothing.
var ErrPendingChanged = fmt.Errorf("the pending revision changed since it was read")

// MarkFailed marks the pending revision p as failed, as `helm set-status
// failed` (klipper-helm) and Helm's own cancelled operations do, with
// description: one update of its Secret, only over the resourceVersion p
// was read at (never a blind overwrite: Helm's own Update is one). It
// changes that revision only: its manifest, values and labels stay.
func (c *Client) MarkFailed(ctx context.Context, p *Pending, description string) error {
	rel := p.Release
	failed := *rel
	info := *rel.Info
	info.Status, info.Description, info.LastDeployed = common.StatusFailed, description, time.Now()
	failed.Info = &info
	data, err := Encode(&failed)
	if err != nil {
		return err
	}
	s := p.secret.DeepCopy() // its resourceVersion makes the update conditional
	s.Data = map[string][]byte{"release": []byte(data)}
	s.Labels["status"] = common.StatusFailed.String()
	s.Labels["modifiedAt"] = strconv.FormatInt(time.Now().Unix(), 10)
	if _, err := c.Kube.CoreV1().Secrets(rel.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: "chart-upgrader"}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, ErrPendingChanged)
		}
		return fmt.Errorf("marking helm release %s/%s revision %d failed: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	return nil
}

// RunningHooks names the release's hook Pods that are still running
// (HookPodsRunning), read from the release's namespace. A pending revision
// whose hook still runs is not abandoned.
func (c *Client) RunningHooks(ctx context.Context, rel *release.Release) ([]string, error) {
	if len(hookOwners(rel.Hooks)) == 0 {
		return nil, nil
	}
	pods, err := c.Kube.CoreV1().Pods(rel.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the pods of helm release %s/%s for its running hooks: %w", rel.Namespace, rel.Name, err)
	}
	return HookPodsRunning(rel.Hooks, pods.Items), nil
}

// hookOwners are the Jobs and Pods among hooks, as Kind/name.
func hookOwners(hooks []*release.Hook) map[string]bool {
	out := map[string]bool{}
	for _, h := range hooks {
		if h != nil && (h.Kind == "Job" || h.Kind == "Pod") {
			out[h.Kind+"/"+h.Name] = true
		}
	}
	return out
}

// HookPodsRunning names the pods, pending or running, of hooks (a hook
// Job's pods by their job-name label, a hook Pod by its name): each as
// its hook, with the pod and its phase.
func HookPodsRunning(hooks []*release.Hook, pods []corev1.Pod) []string {
	owners := hookOwners(hooks)
	var running []string
	for _, p := range pods {
		if p.Status.Phase != corev1.PodPending && p.Status.Phase != corev1.PodRunning {
			continue
		}
		owner := "Pod/" + p.Name
		if job := p.Labels["job-name"]; job != "" {
			owner = "Job/" + job
		}
		if owners[owner] {
			running = append(running, owner+" (pod "+p.Name+", "+string(p.Status.Phase)+")")
		}
	}
	return running
}
