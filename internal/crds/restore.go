package crds

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// Restored is what a rollback did with the CRDs an upgrade replaced.
type Restored struct {
	// Backup is the Secret that keeps them as they were
	// (namespace/name); "" when the upgrade replaced none.
	Backup string
	// Applied are the CRDs put back as they were.
	Applied []Decision
	// Left are the CRDs left as they are, each with why restoring it
	// would not be safe.
	Left []Decision
}

// Restore puts back, as they were before the upgrade, the CRDs that the
// backup Secret name in namespace keeps (Port.Backup), each only when
// that is safe: the same checks as an upgrade's (Judge and the API
// server's dry run), with the copy as the chart's CRD. So a CRD is left as
// it is when the copy would drop a version objects are stored at
// (status.storedVersions: the upgrade wrote objects at a version only it
// added), stop serving one, change its scope or kind, or no longer declare
// fields objects now hold (they would be pruned); never deleted. A CRD the
// upgrade created has no copy and stays. An existing CRD equal to its copy
// is not written again, so a second rollback writes nothing.
func (c *Client) Restore(ctx context.Context, namespace, name string) (*Restored, error) {
	out := &Restored{}
	s, err := c.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return out, nil
	case err != nil:
		return nil, fmt.Errorf("reading the CRDs' backup Secret %s/%s: %w", namespace, name, err)
	}
	out.Backup = namespace + "/" + name
	data, err := gunzip(s.Data[BackupKey])
	if err != nil {
		return nil, fmt.Errorf("backup Secret %s, key %s: %w", out.Backup, BackupKey, err)
	}
	cs, err := Parse([]upgrade.CRDFile{{Path: "Secret " + out.Backup, Data: data}})
	if err != nil {
		return nil, err
	}
	ds, err := c.Check(ctx, CreateReplace, cs)
	if err != nil {
		return nil, err
	}
	var safe []CRD
	var safeDs []Decision
	for i, d := range ds {
		switch {
		case d.Action == ActionUnchanged:
		case d.Action == ActionRefused || len(d.Warnings) > 0:
			out.Left = append(out.Left, d)
		default:
			safe, safeDs = append(safe, cs[i]), append(safeDs, d)
		}
	}
	if len(safe) == 0 {
		return out, nil
	}
	out.Applied, err = c.Apply(ctx, safe, safeDs)
	return out, err
}

func gunzip(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("empty")
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(io.LimitReader(r, 64<<20))
}
