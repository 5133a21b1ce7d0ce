package helmrelease

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	releaser "helm.sh/helm/v4/pkg/release"
	common "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Storage is Helm's storage driver of the releases of namespace: "secret"
// (Helm's default, also "secrets" or ""), "configmap" or "configmaps".
func (c *Client) Storage(namespace, driverName string) driver.Driver {
	if IsConfigMapDriver(driverName) {
		return driver.NewConfigMaps(c.Kube.CoreV1().ConfigMaps(namespace))
	}
	return driver.NewSecrets(c.Kube.CoreV1().Secrets(namespace))
}

// IsConfigMapDriver says whether driverName names Helm's ConfigMap driver.
func IsConfigMapDriver(driverName string) bool {
	return driverName == "configmap" || driverName == "configmaps"
}

// History reads every revision of release name in namespace, oldest
// first; none when it does not exist.
func (c *Client) History(namespace, name, driverName string) ([]*release.Release, error) {
	rels, err := c.Storage(namespace, driverName).Query(map[string]string{"name": name, "owner": "helm"})
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading helm release %s/%s: %w", namespace, name, err)
	}
	out, err := Revisions(rels)
	if err != nil {
		return nil, fmt.Errorf("reading helm release %s/%s: %w", namespace, name, err)
	}
	return out, nil
}

// Revisions are revisions as Helm 4's storage returns them, as the chart
// v2 releases they are, oldest first.
func Revisions(rels []releaser.Releaser) ([]*release.Release, error) {
	out := make([]*release.Release, 0, len(rels))
	for _, r := range rels {
		rel, err := AsRelease(r)
		if err != nil {
			return nil, err
		}
		out = append(out, rel)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// AsRelease is a release Helm 4 returns (its storage, or an action's
// result) as the chart v2 release it is.
func AsRelease(r any) (*release.Release, error) {
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("a helm release revision of an unknown type %T", r)
	}
	return rel, nil
}

// ChartVersion is the version of the chart a revision deployed; "" when
// it holds none.
func ChartVersion(rel *release.Release) string {
	if rel == nil || rel.Chart == nil || rel.Chart.Metadata == nil {
		return ""
	}
	return rel.Chart.Metadata.Version
}

// Newest reads the newest revision of release name; nil when there is
// none.
func (c *Client) Newest(namespace, name, driverName string) (*release.Release, error) {
	h, err := c.History(namespace, name, driverName)
	if err != nil || len(h) == 0 {
		return nil, err
	}
	return h[len(h)-1], nil
}

// Decode decodes a release record as Helm's storage drivers write it:
// base64 of (gzipped) JSON.
func Decode(data string) (*release.Release, error) {
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil, err
	}
	if len(b) > 3 && bytes.Equal(b[0:3], []byte{0x1f, 0x8b, 0x08}) {
		r, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		if b, err = io.ReadAll(r); err != nil {
			return nil, err
		}
	}
	var rel release.Release
	if err := json.Unmarshal(b, &rel); err != nil {
		return nil, err
	}
	return &rel, nil
}

// NewestStatus is the status of the newest revision of release name in
// namespace ("deployed", "pending-upgrade", …), from the labels Helm's
// Secrets driver writes on each record (owner, name, version, status):
// one list, no record decoded. "" when there is no revision.
func (c *Client) NewestStatus(ctx context.Context, namespace, name string) (status common.Status, revision int, err error) {
	list, err := c.Kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.Set{"owner": "helm", "name": name}.String()})
	if err != nil {
		return "", 0, fmt.Errorf("listing helm release records of %s/%s: %w", namespace, name, err)
	}
	for _, s := range list.Items {
		v, err := strconv.Atoi(s.Labels["version"])
		if err != nil || v <= revision {
			continue
		}
		revision, status = v, common.Status(s.Labels["status"])
	}
	return status, revision, nil
}
