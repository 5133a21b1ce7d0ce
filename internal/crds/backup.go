package crds

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// BackupKey is the key of the backup Secret that holds the CRDs: a YAML
// stream, gzipped.
const BackupKey = "crds.yaml.gz"

// maxBackup is the most a backup Secret may hold (a Secret's limit is
// 1 MiB, with its metadata).
const maxBackup = 1000 << 10

// BackupName is the Secret that keeps the CRDs an upgrade of target from
// fromVersion replaced, as they were:
// chart-upgrader-crds-<kind>-<name>-<version>, beside the target's
// backup.
func BackupName(target upgrade.Ref, fromVersion string) string {
	n := "chart-upgrader-crds-" + target.Kind + "-" + target.Name + "-" + kind.Sanitize(fromVersion)
	if len(n) > 253 {
		n = n[:253]
	}
	return strings.TrimRight(n, "-.")
}

// backup writes the CRDs ds replace or migrate, as the cluster held them
// (without status and server metadata), into the Secret name in
// namespace, once: an existing one is left as it is.
func (c *Client) backup(ctx context.Context, ds []Decision, namespace, name string, labels map[string]string) (bool, error) {
	var stream bytes.Buffer
	n := 0
	for _, d := range ds {
		if (d.Action != ActionReplace && d.Action != ActionMigrate) || d.was == nil {
			continue
		}
		was := d.was.DeepCopy()
		unstructured.RemoveNestedField(was.Object, "status")
		for _, f := range []string{"managedFields", "resourceVersion", "uid", "generation", "creationTimestamp"} {
			unstructured.RemoveNestedField(was.Object, "metadata", f)
		}
		data, err := yaml.Marshal(was.Object)
		if err != nil {
			return false, err
		}
		stream.WriteString("---\n")
		stream.Write(data)
		n++
	}
	if n == 0 {
		return false, nil
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	if _, err := w.Write(stream.Bytes()); err != nil {
		return false, err
	}
	if err := w.Close(); err != nil {
		return false, err
	}
	if gz.Len() > maxBackup {
		return false, fmt.Errorf("the %d CRDs it replaces are %d bytes gzipped, more than a Secret holds (%d)", n, gz.Len(), maxBackup)
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Data: map[string][]byte{BackupKey: gz.Bytes()}}
	_, err := c.Kube.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{FieldManager: Manager})
	switch {
	case apierrors.IsAlreadyExists(err):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, nil
}
