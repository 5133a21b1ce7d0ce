// Package specobject is what chart-upgrader keeps on a target that is one
// Kubernetes object with a spec (a ManagedChart, a HelmChart): the record
// annotations of an apply, and the backup Secret of the whole spec, taken
// once before an upgrade (docs/design.md §4.2). Every such kind writes
// them the same way, so a person and every later run read them the same
// way.
package specobject

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// The annotations chart-upgrader writes on a target: the cluster-wide
// record of what it applied, read by every later run on any node.
const (
	AnnotationVersion         = "chart-upgrader.io/version"
	AnnotationValuesHash      = "chart-upgrader.io/values-sha256"
	AnnotationAppliedAt       = "chart-upgrader.io/applied-at"
	AnnotationPreviousVersion = "chart-upgrader.io/previous-version"
	// AnnotationPaused says chart-upgrader paused the target itself, so a
	// later run may unpause it.
	AnnotationPaused = "chart-upgrader.io/paused"
)

// Record is the record the annotations hold.
func Record(ann map[string]string) upgrade.Record {
	return upgrade.Record{Version: ann[AnnotationVersion], ValuesHash: ann[AnnotationValuesHash],
		AppliedAt: ann[AnnotationAppliedAt], PreviousVersion: ann[AnnotationPreviousVersion]}
}

// RecordAnnotations are the annotations an apply writes for r; an empty
// value means the annotation is removed (our pause mark, since an apply
// unpauses).
func RecordAnnotations(r upgrade.Record) map[string]string {
	return map[string]string{
		AnnotationVersion:         r.Version,
		AnnotationValuesHash:      r.ValuesHash,
		AnnotationAppliedAt:       r.AppliedAt,
		AnnotationPreviousVersion: r.PreviousVersion,
		AnnotationPaused:          "",
	}
}

// Annotate applies changes to ann (an empty value removes the key) and
// returns the result; ann may be nil.
func Annotate(ann, changes map[string]string) map[string]string {
	if ann == nil {
		ann = map[string]string{}
	}
	for k, v := range changes {
		if v == "" {
			delete(ann, k)
			continue
		}
		ann[k] = v
	}
	return ann
}

// Backup keys and labels. A backup Secret is labelled with the name and
// the kind of its target, so two targets of the same name and different
// kinds in one namespace never read each other's backups.
const (
	BackupKeySpec       = "spec.yaml"
	BackupKeyAnnotation = "annotations.yaml"
	LabelBackupOf       = "chart-upgrader.io/backup-of"
	LabelBackupKind     = "chart-upgrader.io/backup-kind"
	LabelBackupVersion  = "chart-upgrader.io/backup-version"
)

// Object is the target object as a backup keeps it.
type Object struct {
	Kind            kind.Descriptor
	Namespace, Name string
	Version         string // the version it deploys: names the backup
	Spec            map[string]any
	Annotations     map[string]string
}

// EnsureBackup writes the whole spec of o into its backup Secret, once:
// when the Secret exists it is left as it is, so a re-run never replaces
// the spec from before the first attempt. created says whether this call
// wrote it.
func EnsureBackup(ctx context.Context, kube kubernetes.Interface, o Object) (created bool, err error) {
	name := o.Kind.BackupName(o.Name, o.Version)
	secrets := kube.CoreV1().Secrets(o.Namespace)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return false, nil
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading backup secret %s/%s: %w", o.Namespace, name, err)
	}
	spec, err := yaml.Marshal(o.Spec)
	if err != nil {
		return false, fmt.Errorf("encoding the spec of %s/%s/%s: %w", o.Kind.Name, o.Namespace, o.Name, err)
	}
	ann, err := yaml.Marshal(o.Annotations)
	if err != nil {
		return false, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader",
				LabelBackupOf: o.Name, LabelBackupKind: o.Kind.Name, LabelBackupVersion: kind.Sanitize(o.Version)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{BackupKeySpec: spec, BackupKeyAnnotation: ann},
	}
	if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return false, fmt.Errorf("writing backup secret %s/%s: %w", o.Namespace, name, err)
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

// ReadBackup reads the backup of target object name of kind k from
// fromVersion; when fromVersion is empty, the newest backup of it. A
// Legacy kind's backups written under the old name (without the kind
// label) are found too.
func ReadBackup(ctx context.Context, kube kubernetes.Interface, k kind.Descriptor, namespace, name, fromVersion string) (*Backup, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	var s *corev1.Secret
	if fromVersion != "" {
		bn := k.BackupName(name, fromVersion)
		got, err := secrets.Get(ctx, bn, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && k.Legacy {
			if old, lerr := secrets.Get(ctx, k.LegacyBackupName(name, fromVersion), metav1.GetOptions{}); lerr == nil && belongs(old, k) {
				got, err = old, nil
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reading backup secret %s/%s: %w", namespace, bn, err)
		}
		s = got
	} else {
		list, err := backups(ctx, kube, k, namespace, name)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("no backup of %s %s/%s", k.Name, namespace, name)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].CreationTimestamp.Before(&list[j].CreationTimestamp) })
		s = &list[len(list)-1]
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

// belongs reports whether backup Secret s is one of kind k's: labelled
// with k, or (for a Legacy kind) written before backups carried a kind.
func belongs(s *corev1.Secret, k kind.Descriptor) bool {
	got, ok := s.Labels[LabelBackupKind]
	if !ok {
		return k.Legacy
	}
	return got == k.Name
}

// backups lists the backup Secrets of target object name of kind k, in one
// request.
func backups(ctx context.Context, kube kubernetes.Interface, k kind.Descriptor, namespace, name string) ([]corev1.Secret, error) {
	list, err := kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelBackupOf + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("listing backups of %s %s/%s: %w", k.Name, namespace, name, err)
	}
	var out []corev1.Secret
	for _, s := range list.Items {
		if belongs(&s, k) {
			out = append(out, s)
		}
	}
	return out, nil
}

// BackupNames names the backup Secrets of target object name of kind k.
func BackupNames(ctx context.Context, kube kubernetes.Interface, k kind.Descriptor, namespace, name string) ([]string, error) {
	list, err := backups(ctx, kube, k, namespace, name)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range list {
		out = append(out, s.Name)
	}
	return out, nil
}

// Conflict maps the API server's conflict (the object changed since it
// was read) to upgrade.ErrConflict, so the core reads again and retries;
// any other error is returned as it is.
func Conflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsConflict(errors.Unwrap(err)) {
		return fmt.Errorf("%w: %w", upgrade.ErrConflict, err)
	}
	return err
}

// BackupStore is the backup part of the upgrade.Target port of a kind
// that is one object: its adapter says how to read the user values of a
// backed-up spec, the rest is the same for every such kind. An adapter
// embeds it for ReadBackup and Backups.
type BackupStore struct {
	Kube kubernetes.Interface
	Kind kind.Descriptor
	// Namespace and Name name the target object.
	Namespace, Name string
	// Values are the user values the backed-up spec gives Helm.
	Values func(b *Backup) (map[string]any, error)
}

// Save writes o into its backup Secret, once: the port's Backup.
func (s BackupStore) Save(ctx context.Context, o Object) (string, bool, error) {
	created, err := EnsureBackup(ctx, s.Kube, o)
	return s.Kind.BackupName(o.Name, o.Version), created, err
}

// ReadBackup reads the backup taken when upgrading from fromVersion (the
// newest when empty), with the hash of its values: the port's ReadBackup.
func (s BackupStore) ReadBackup(ctx context.Context, fromVersion string) (*upgrade.Backup, error) {
	b, err := ReadBackup(ctx, s.Kube, s.Kind, s.Namespace, s.Name, fromVersion)
	if err != nil {
		return nil, err
	}
	vals, err := s.Values(b)
	if err != nil {
		return nil, fmt.Errorf("backup secret %s/%s: %w", s.Namespace, b.Name, err)
	}
	hash, err := values.Hash(vals)
	if err != nil {
		return nil, err
	}
	version := b.Version
	if version == "" {
		version = fromVersion
	}
	return &upgrade.Backup{Name: b.Name, Version: version, ValuesHash: hash, Data: b}, nil
}

// Backups names the backup Secrets kept: the port's Backups.
func (s BackupStore) Backups(ctx context.Context) ([]string, error) {
	return BackupNames(ctx, s.Kube, s.Kind, s.Namespace, s.Name)
}
