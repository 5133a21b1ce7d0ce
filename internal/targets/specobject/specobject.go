// Package specobject is what chart-upgrader keeps on a target that is one
// Kubernetes object with a spec (a ManagedChart, a HelmChart): the record
// annotations of an apply, and the backup Secret of the whole spec, taken
// once before an upgrade (docs/design.md §4.2). Every such kind writes
// them the same way, so a person and every later run read them the same
// way.
package specobject

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
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

// Backup keys and labels.
const (
	BackupKeySpec       = "spec.yaml"
	BackupKeyAnnotation = "annotations.yaml"
	LabelBackupOf       = "chart-upgrader.io/backup-of"
	LabelBackupVersion  = "chart-upgrader.io/backup-version"
)

// BackupName is the Secret holding the spec of the target object name
// before an upgrade from fromVersion.
func BackupName(name, fromVersion string) string {
	n := "chart-upgrader-backup-" + name + "-" + sanitize(fromVersion)
	if len(n) > 253 {
		n = n[:253]
	}
	return strings.TrimRight(n, "-.")
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

// Object is the target object as a backup keeps it.
type Object struct {
	Kind            string // for messages: managedchart, helmchart
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
	name := BackupName(o.Name, o.Version)
	secrets := kube.CoreV1().Secrets(o.Namespace)
	if _, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
		return false, nil
	} else if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("reading backup secret %s/%s: %w", o.Namespace, name, err)
	}
	spec, err := yaml.Marshal(o.Spec)
	if err != nil {
		return false, fmt.Errorf("encoding the spec of %s/%s/%s: %w", o.Kind, o.Namespace, o.Name, err)
	}
	ann, err := yaml.Marshal(o.Annotations)
	if err != nil {
		return false, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "chart-upgrader",
				LabelBackupOf: o.Name, LabelBackupVersion: sanitize(o.Version)}},
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

// ReadBackup reads the backup of target object name (of kind, for
// messages) from fromVersion; when fromVersion is empty, the newest
// backup of it.
func ReadBackup(ctx context.Context, kube kubernetes.Interface, kind, namespace, name, fromVersion string) (*Backup, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	var s *corev1.Secret
	if fromVersion != "" {
		got, err := secrets.Get(ctx, BackupName(name, fromVersion), metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading backup secret %s/%s: %w", namespace, BackupName(name, fromVersion), err)
		}
		s = got
	} else {
		list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: LabelBackupOf + "=" + name})
		if err != nil {
			return nil, fmt.Errorf("listing backups of %s/%s: %w", namespace, name, err)
		}
		if len(list.Items) == 0 {
			return nil, fmt.Errorf("no backup of %s %s/%s", kind, namespace, name)
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

// Backups names the backup Secrets of target object name.
func Backups(ctx context.Context, kube kubernetes.Interface, namespace, name string) ([]string, error) {
	secrets, err := kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{LabelSelector: LabelBackupOf + "=" + name})
	if err != nil {
		return nil, fmt.Errorf("listing backups: %w", err)
	}
	var out []string
	for _, s := range secrets.Items {
		out = append(out, s.Name)
	}
	return out, nil
}
