package targets

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/helmchart"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/kind"
	"github.com/chart-upgrader/chart-upgrader/internal/targets/managedchart"
)

// deployers are the kinds whose objects deploy releases, with the
// resource they are listed from and how one object reads.
var deployers = []struct {
	gvr  schema.GroupVersionResource
	read func(ns, name string, obj map[string]any) (release string, d kind.Deployed, ok bool)
}{
	{helmchart.HelmChartGVR, helmchart.DeployedRelease},
	{managedchart.ManagedChartGVR, managedchart.DeployedRelease},
}

// DeployedReleases lists the objects of every kind that deploys releases
// (one LIST each) and returns them by release namespace/name. A kind this
// process may not list, or that the cluster does not serve, is named in
// notRead (forbidden) or left out (not served).
func DeployedReleases(ctx context.Context, dyn dynamic.Interface) (out map[string]kind.Deployed, notRead []string, err error) {
	out = map[string]kind.Deployed{}
	for _, k := range deployers {
		l, err := dyn.Resource(k.gvr).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case apierrors.IsForbidden(err):
			notRead = append(notRead, fmt.Sprintf("which releases the %s deploy: this process may not list them", k.gvr.GroupResource()))
			continue
		case err != nil:
			return nil, nil, fmt.Errorf("listing %s: %w", k.gvr.GroupResource(), err)
		}
		for _, u := range l.Items {
			if release, d, ok := k.read(u.GetNamespace(), u.GetName(), u.Object); ok {
				out[release] = d
			}
		}
	}
	return out, notRead, nil
}

// DeployedReleasesRBAC is what DeployedReleases reads.
func DeployedReleasesRBAC() []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, k := range deployers {
		out = append(out, rbacv1.PolicyRule{APIGroups: []string{k.gvr.Group}, Resources: []string{k.gvr.Resource}, Verbs: []string{"list"}})
	}
	return out
}
