package helmrelease

import (
	"context"
	"fmt"

	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/apimap"
)

// This file maps a revision's stored manifest from the API versions the
// cluster no longer serves (apimap), as helm-mapkubeapis does: Helm 4
// cannot upgrade or roll back a release whose deployed manifest it cannot
// build.

// MappedBackupName is the Secret that keeps revision version of release
// name's record as it was before MapRemovedAPIs rewrote it.
func MappedBackupName(name string, version int) string {
	return fmt.Sprintf("chart-upgrader-mapped-%s.v%d", name, version)
}

// ErrRecordChanged: a revision's record changed since it was read;
// nothing was written.
var ErrRecordChanged = fmt.Errorf("the revision's record changed since it was read")

// MapRemovedAPIs maps the stored manifest of revision rel (as read) from
// the versions the cluster no longer serves to those that replace them,
// and returns the mappings made; none when it holds none, and then it
// writes nothing. It first keeps the record as it was in the Secret
// MappedBackupName (made once: a second mapping keeps the first
// original), then writes the record over the resourceVersion it read
// (ErrRecordChanged when it changed since, or no longer holds rel's
// manifest). Only the manifest changes: status, values and labels stay.
func (c *Client) MapRemovedAPIs(ctx context.Context, rel *release.Release) ([]apimap.Mapping, error) {
	secrets := c.Kube.CoreV1().Secrets(rel.Namespace)
	s, now, err := c.readRecord(ctx, rel)
	if err != nil {
		return nil, err
	}
	if now.Manifest != rel.Manifest {
		return nil, fmt.Errorf("helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, ErrRecordChanged)
	}
	manifest, mapped, err := apimap.Map(now.Manifest, c.Mapper())
	if err != nil {
		return nil, fmt.Errorf("mapping the removed APIs of helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	if len(mapped) == 0 {
		return nil, nil
	}
	backup := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: MappedBackupName(rel.Name, rel.Version), Namespace: rel.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader", "name": rel.Name}},
		Type: s.Type, Data: map[string][]byte{"release": s.Data["release"]},
	}
	if _, err := secrets.Create(ctx, backup, metav1.CreateOptions{FieldManager: "chart-upgrader"}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("keeping the record of helm release %s/%s revision %d in Secret %s: %w", rel.Namespace, rel.Name, rel.Version, backup.Name, err)
	}
	now.Manifest = manifest
	data, err := Encode(now)
	if err != nil {
		return nil, err
	}
	s = s.DeepCopy() // its resourceVersion makes the update conditional
	s.Data = map[string][]byte{"release": []byte(data)}
	if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{FieldManager: "chart-upgrader"}); err != nil {
		if apierrors.IsConflict(err) {
			return nil, fmt.Errorf("helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, ErrRecordChanged)
		}
		return nil, fmt.Errorf("writing the mapped record of helm release %s/%s revision %d: %w", rel.Namespace, rel.Name, rel.Version, err)
	}
	return mapped, nil
}
