// Package serverrules validates an object of a built-in kind as the
// Kubernetes API server validates a create or an update of it, with the
// API server's own code: the object is decoded, defaulted and converted
// by k8s.io/kubernetes's scheme and passed to the kind's registry
// strategy (the code behind every 422 Invalid: immutable selectors, a
// StatefulSet's non-updatable fields, quantities, names, duplicate ports,
// required fields, roleRef, immutable ConfigMaps and Secrets, …). It
// writes nothing and needs nothing from the cluster: the preflight's
// prediction of the server's verdict, computed from reads alone.
//
// Its limits: admission is not run here (package applycheck runs the
// admission that can be computed from reads, each with the API server's
// own code: Pod Security, ResourceQuota, LimitRange, ValidatingAdmission
// Policies; webhooks are only named); the feature gates are the library's defaults, not the
// cluster's; privileged containers are taken as allowed (the API server's
// --allow-privileged, which every common distribution sets, cannot be
// read); a Service's IP allocation is not run (the allocator, not the
// strategy, refuses a taken clusterIP or nodePort).
package serverrules

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/capabilities"

	_ "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	_ "k8s.io/kubernetes/pkg/apis/apps/install"
	_ "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	_ "k8s.io/kubernetes/pkg/apis/networking/install"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	_ "k8s.io/kubernetes/pkg/apis/rbac/install"
	_ "k8s.io/kubernetes/pkg/apis/scheduling/install"
	_ "k8s.io/kubernetes/pkg/apis/storage/install"

	"k8s.io/kubernetes/pkg/registry/admissionregistration/mutatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/admissionregistration/validatingwebhookconfiguration"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/limitrange"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/service"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"
)

// The API server's --allow-privileged is not readable from the cluster;
// every distribution Harvester, k3s and RKE2 run on (and kubeadm's)
// sets it, and a chart such as Harvester's runs privileged DaemonSets.
// The library's default (false) would refuse every one of them.
func init() { capabilities.Setup(true, 0) }

// strategy is what the API server runs before it stores a create or an
// update of a kind.
type strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// strategies are the kinds validated, by group and kind (every version
// of a kind the scheme decodes shares its strategy).
var strategies = map[schema.GroupKind]strategy{
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:   mutatingwebhookconfiguration.Strategy,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}: validatingwebhookconfiguration.Strategy,
	{Group: "apps", Kind: "DaemonSet"}:                                              daemonset.Strategy,
	{Group: "apps", Kind: "Deployment"}:                                             deployment.Strategy,
	{Group: "apps", Kind: "ReplicaSet"}:                                             replicaset.Strategy,
	{Group: "apps", Kind: "StatefulSet"}:                                            statefulset.Strategy,
	{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}:                         horizontalpodautoscaler.Strategy,
	{Group: "batch", Kind: "CronJob"}:                                               cronjob.Strategy,
	{Group: "batch", Kind: "Job"}:                                                   job.Strategy,
	{Kind: "ConfigMap"}:                                                             configmap.Strategy,
	{Kind: "LimitRange"}:                                                            limitrange.Strategy,
	{Kind: "Namespace"}:                                                             namespace.Strategy,
	{Kind: "PersistentVolume"}:                                                      persistentvolume.Strategy,
	{Kind: "PersistentVolumeClaim"}:                                                 persistentvolumeclaim.Strategy,
	{Kind: "Pod"}:                                                                   pod.Strategy,
	{Kind: "ResourceQuota"}:                                                         resourcequota.Strategy,
	{Kind: "Secret"}:                                                                secret.Strategy,
	{Kind: "Service"}:                                                               service.Strategy,
	{Kind: "ServiceAccount"}:                                                        serviceaccount.Strategy,
	{Group: "networking.k8s.io", Kind: "Ingress"}:                                   ingress.Strategy,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                              ingressclass.Strategy,
	{Group: "networking.k8s.io", Kind: "NetworkPolicy"}:                             networkpolicy.Strategy,
	{Group: "policy", Kind: "PodDisruptionBudget"}:                                  poddisruptionbudget.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                       clusterrole.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                clusterrolebinding.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "Role"}:                              role.Strategy,
	{Group: "rbac.authorization.k8s.io", Kind: "RoleBinding"}:                       rolebinding.Strategy,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                             priorityclass.Strategy,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                 storageclass.Strategy,
}

// Knows says whether Validate has the API server's rules for gvk's kind
// at its version.
func Knows(gvk schema.GroupVersionKind) bool {
	_, ok := strategies[gvk.GroupKind()]
	return ok && legacyscheme.Scheme.Recognizes(gvk)
}

// Validate is the API server's verdict on storing obj: a create when live
// is nil, else an update of live. The error is the server's own (a 422
// Invalid naming each field, or the decode error of a malformed value
// such as a quantity); nil when it would accept it, or when the kind is
// not one it knows (Knows). obj is what the apply would send merged with
// live: the object as the server would store it.
func Validate(live, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	s, ok := strategies[gvk.GroupKind()]
	if !ok || !legacyscheme.Scheme.Recognizes(gvk) {
		return nil
	}
	newObj, err := decode(obj)
	if err != nil {
		return err
	}
	ns := obj.GetNamespace()
	if !s.NamespaceScoped() {
		ns = ""
	}
	ctx := genericapirequest.WithNamespace(context.Background(), ns)
	resource, _ := meta.UnsafeGuessKindToResource(gvk)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{IsResourceRequest: true,
		APIGroup: gvk.Group, APIVersion: gvk.Version, Resource: resource.Resource, Namespace: ns, Name: obj.GetName()})
	newMeta, err := meta.Accessor(newObj)
	if err != nil {
		return err
	}
	if live == nil {
		ctx = genericapirequest.WithRequestInfo(ctx, withVerb(ctx, "create"))
		rest.FillObjectMetaSystemFields(newMeta)
		return rest.BeforeCreate(s, ctx, newObj)
	}
	oldObj, err := decode(live)
	if err != nil {
		return fmt.Errorf("reading the live object: %w", err)
	}
	// the server writes over the live object: what the request leaves
	// out of its metadata is the live object's
	if newMeta.GetResourceVersion() == "" {
		newMeta.SetResourceVersion(live.GetResourceVersion())
	}
	ctx = genericapirequest.WithRequestInfo(ctx, withVerb(ctx, "update"))
	return rest.BeforeUpdate(s, ctx, newObj, oldObj)
}

// withVerb is ctx's request as verb.
func withVerb(ctx context.Context, verb string) *genericapirequest.RequestInfo {
	info, _ := genericapirequest.RequestInfoFrom(ctx)
	out := *info
	out.Verb = verb
	return &out
}

// decode is u as the API server holds a request body of it: decoded from
// JSON at its version, defaulted, and converted to the internal version
// its strategies validate.
func decode(u *unstructured.Unstructured) (runtime.Object, error) {
	data, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	obj, _, err := legacyscheme.Codecs.UniversalDecoder().Decode(data, nil, nil)
	return obj, err
}
