package suc

import (
	"bytes"
	"fmt"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
)

// CheckRBACOptions say whose read-only access CheckRBAC grants.
type CheckRBACOptions struct {
	Name           string // the Roles' and ClusterRole's name (the Plan's, with -conflict-check)
	Namespace      string // the ServiceAccount's namespace
	ServiceAccount string
	// ReleaseNamespace is the namespace of the chart's namespaced objects
	// that name none (the release's).
	ReleaseNamespace string
	// CRDs are the CustomResourceDefinitions of the chart's and its
	// subcharts' crds/ folders, which Helm installs beside the templates:
	// they say the scope of their kinds (a cluster-scoped
	// VolumeSnapshotClass), and are not objects to grant reads of.
	CRDs []*unstructured.Unstructured
	// Mapper, when set, is the cluster's discovery: the scope and resource
	// of a kind neither the chart's CRDs nor Kubernetes' own kinds give (a
	// ClusterIssuer whose CRD another chart installed). Without it such a
	// kind is taken as namespaced, its resource guessed from its name.
	Mapper meta.RESTMapper
	// CRDPolicy is the spec's apply.crds (create, createReplace; "" or
	// skip: none): the rules it needs are added, on exactly the chart's
	// CRDs (crdRules).
	CRDPolicy string
	// CRDMigrate (apply.crds migrate: true, with createReplace) adds what
	// a storage-version migration needs: update on each CRD's objects and
	// on the CRDs' status (status.storedVersions), by name.
	CRDMigrate bool
	// Spec are the reads the upgrade spec's own settings make (its rules'
	// sources, its health gates), added to the chart's.
	Spec SpecReads
	// Pulls are the image check's reads (PullReads): the pods'
	// ServiceAccounts and pull secrets, by name.
	Pulls SpecReads
}

// crdRules are the rules apply.crds needs on the chart's CRDs under
// policy: create on customresourcedefinitions (which RBAC cannot scope by
// name), and get, patch (the server-side apply), list and watch (the wait
// for Established, by name) on exactly those; with createReplace also
// list on each CRD's objects (counted when a stored version would no
// longer be served) and get on a conversion webhook's Service; with
// migrate, update on the objects and on the CRDs' status. Nothing for
// skip.
func crdRules(crds []*unstructured.Unstructured, policy string, migrate bool) (cluster []rbacv1.PolicyRule, byNamespace map[string][]rbacv1.PolicyRule) {
	if policy == "" || policy == "skip" || len(crds) == 0 {
		return nil, nil
	}
	var names []string
	byNamespace = map[string][]rbacv1.PolicyRule{}
	for _, c := range crds {
		if !slices.Contains(names, c.GetName()) {
			names = append(names, c.GetName())
		}
		if policy != "createReplace" {
			continue
		}
		group, _, _ := unstructured.NestedString(c.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(c.Object, "spec", "names", "plural")
		verbs := []string{"list"}
		if migrate {
			verbs = append(verbs, "update")
		}
		cluster = append(cluster, rbacv1.PolicyRule{APIGroups: []string{group}, Resources: []string{plural}, Verbs: verbs})
		svc, _, _ := unstructured.NestedMap(c.Object, "spec", "conversion", "webhook", "clientConfig", "service")
		if ns, _ := svc["namespace"].(string); ns != "" {
			name, _ := svc["name"].(string)
			byNamespace[ns] = append(byNamespace[ns], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"},
				ResourceNames: []string{name}, Verbs: []string{"get"}})
		}
	}
	sort.Strings(names)
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: names,
			Verbs: []string{"get", "list", "patch", "watch"}},
	}
	if migrate && policy == "createReplace" {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions/status"},
			ResourceNames: names, Verbs: []string{"update"}})
	}
	cluster = append(rules, cluster...)
	return cluster, byNamespace
}

// clusterScoped are Kubernetes' own kinds that are not namespaced, by
// group/Kind; a chart's CustomResourceDefinition says its own scope.
var clusterScoped = map[string]bool{
	"/Namespace": true, "/Node": true, "/PersistentVolume": true, "/ComponentStatus": true,
	"rbac.authorization.k8s.io/ClusterRole": true, "rbac.authorization.k8s.io/ClusterRoleBinding": true,
	"storage.k8s.io/StorageClass": true, "storage.k8s.io/CSIDriver": true, "storage.k8s.io/CSINode": true,
	"storage.k8s.io/VolumeAttachment": true, "storage.k8s.io/VolumeAttributesClass": true,
	"apiextensions.k8s.io/CustomResourceDefinition": true, "apiregistration.k8s.io/APIService": true,
	"scheduling.k8s.io/PriorityClass": true, "node.k8s.io/RuntimeClass": true, "networking.k8s.io/IngressClass": true,
	"networking.k8s.io/IPAddress": true, "networking.k8s.io/ServiceCIDR": true,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration":   true,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":     true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicy":        true,
	"admissionregistration.k8s.io/ValidatingAdmissionPolicyBinding": true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicy":          true,
	"admissionregistration.k8s.io/MutatingAdmissionPolicyBinding":   true,
	"flowcontrol.apiserver.k8s.io/FlowSchema":                       true,
	"flowcontrol.apiserver.k8s.io/PriorityLevelConfiguration":       true,
	"certificates.k8s.io/CertificateSigningRequest":                 true,
	"certificates.k8s.io/ClusterTrustBundle":                        true,
	"resource.k8s.io/DeviceClass":                                   true,
	"resource.k8s.io/ResourceSlice":                                 true,
}

// ruleKey is one rule of a Role: a resource of a group in a namespace
// ("" for the ClusterRole).
type ruleKey struct{ namespace, group, resource string }

// CheckRBAC builds the read-only RBAC that lets the ServiceAccount's
// conflict check read every object of a rendered chart (objs): in each
// namespace a Role, and for cluster-scoped objects a ClusterRole, each
// bound to the ServiceAccount. A resource with one object, and every
// Secret, is granted get by resourceNames; a resource with more is
// granted get and list (one list reads them all). No rule grants a write.
func CheckRBAC(objs []*unstructured.Unstructured, opts CheckRBACOptions) ([]byte, error) {
	crdScope := map[string]bool{} // group/Kind → namespaced, from the chart's CRDs
	for _, o := range append(slices.Clone(opts.CRDs), objs...) {
		if o.GetKind() == "CustomResourceDefinition" {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			scope, _, _ := unstructured.NestedString(o.Object, "spec", "scope")
			crdScope[group+"/"+kind] = scope != "Cluster"
		}
	}
	names := map[ruleKey][]string{}
	written := map[string]bool{} // the namespaces of the chart's namespaced objects
	podsIn := map[string]bool{}  // those its workloads make pods in
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		if gvk.Kind == "" || o.GetName() == "" {
			continue
		}
		gk := gvk.Group + "/" + gvk.Kind
		plural, _ := meta.UnsafeGuessKindToResource(gvk)
		resource := plural.Resource
		namespaced, known := crdScope[gk]
		if !known && opts.Mapper != nil {
			if m, err := opts.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err == nil {
				namespaced, known = m.Scope.Name() == meta.RESTScopeNameNamespace, true
				resource = m.Resource.Resource
			} else if !meta.IsNoMatchError(err) {
				return nil, fmt.Errorf("reading the scope of %s from the cluster's discovery: %w", gvk.GroupKind(), err)
			}
		}
		if !known {
			namespaced = !clusterScoped[gk]
		}
		k := ruleKey{group: gvk.Group, resource: resource}
		if namespaced {
			if k.namespace = o.GetNamespace(); k.namespace == "" {
				k.namespace = opts.ReleaseNamespace
			}
			written[k.namespace] = true
			if manifest.MakesPods(gvk.GroupKind()) {
				podsIn[k.namespace] = true
			}
		}
		if !slices.Contains(names[k], o.GetName()) {
			names[k] = append(names[k], o.GetName())
		}
	}
	if len(names) == 0 && len(opts.Spec) == 0 {
		return nil, fmt.Errorf("the chart renders no object to grant reads of")
	}
	// the namespaces other than the release's that the chart's objects go
	// into: preflight reads each, by name, to know a new object's
	// namespace exists (one the chart creates is one of its objects)
	var others []string
	for k := range names {
		if ns := k.namespace; ns != "" && !slices.Contains(others, ns) {
			others = append(others, ns)
		}
	}
	nsKey := ruleKey{resource: "namespaces"}
	for _, ns := range others {
		if !slices.Contains(names[nsKey], ns) {
			names[nsKey] = append(names[nsKey], ns)
		}
	}
	rules := map[string][]rbacv1.PolicyRule{} // by namespace
	for k, n := range names {
		r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}}
		if len(n) == 1 || (k.group == "" && (k.resource == "secrets" || k.resource == "namespaces")) {
			sort.Strings(n)
			r.ResourceNames, r.Verbs = n, []string{"get"}
		} else {
			r.Verbs = []string{"get", "list"}
		}
		rules[k.namespace] = append(rules[k.namespace], r)
	}
	// what preflight reads to judge the rollout: each namespace's quotas,
	// the LimitRanges where pods are made, the nodes and the pods bound
	// to them, the admission policies and webhooks
	for ns := range written {
		rules[ns] = append(rules[ns], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"list"}})
		if podsIn[ns] {
			rules[ns] = append(rules[ns], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"limitranges"}, Verbs: []string{"list"}})
		}
	}
	admissionReads := []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingadmissionpolicies",
			"validatingadmissionpolicybindings", "validatingwebhookconfigurations"}, Verbs: []string{"list"}}}
	if len(podsIn) > 0 {
		admissionReads = append(admissionReads, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: []string{"list"}})
	}
	rules[""] = append(rules[""], admissionReads...)
	for ns, rs := range opts.Spec {
		rules[ns] = append(rules[ns], rs...)
	}
	for ns, rs := range opts.Pulls {
		rules[ns] = append(rules[ns], rs...)
	}
	crdCluster, crdNamespaced := crdRules(opts.CRDs, opts.CRDPolicy, opts.CRDMigrate)
	namespaces := make([]string, 0, len(rules))
	for ns, rs := range rules {
		sort.Slice(rs, func(i, j int) bool {
			return rs[i].APIGroups[0]+"/"+rs[i].Resources[0] < rs[j].APIGroups[0]+"/"+rs[j].Resources[0]
		})
		namespaces = append(namespaces, ns)
	}
	if len(crdCluster) > 0 {
		if _, ok := rules[""]; !ok {
			namespaces = append(namespaces, "")
		}
		rules[""] = append(rules[""], crdCluster...)
	}
	for ns, rs := range crdNamespaced {
		if _, ok := rules[ns]; !ok {
			namespaces = append(namespaces, ns)
		}
		rules[ns] = append(rules[ns], rs...)
	}
	sort.Strings(namespaces)
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: opts.ServiceAccount, Namespace: opts.Namespace}}
	var docs []any
	for _, ns := range namespaces {
		kind, bindingKind := "Role", "RoleBinding"
		if ns == "" {
			kind, bindingKind = "ClusterRole", "ClusterRoleBinding"
		}
		docs = append(docs,
			map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
				"metadata": metav1.ObjectMeta{Name: opts.Name, Namespace: ns}, "rules": rules[ns]},
			map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": bindingKind,
				"metadata": metav1.ObjectMeta{Name: opts.Name, Namespace: ns},
				"roleRef":  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: kind, Name: opts.Name},
				"subjects": subject})
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Read-only RBAC for the conflict check of %s: get (and list) on each object\n"+
		"# the chart renders, nothing else (chart-upgrader plan --check-chart; regenerate when the chart changes).\n",
		opts.ServiceAccount)
	if len(opts.Spec) > 0 {
		fmt.Fprintf(&b, "# Also the reads of the upgrade spec (--check-spec): get on the source of each of\n"+
			"# its live and once rules, by name; list and watch on the objects its health gates read.\n")
	}
	if len(opts.Pulls) > 0 {
		fmt.Fprintf(&b, "# Also the image check's: get on the ServiceAccount and the pull secrets of each\n"+
			"# pod the chart makes, hooks included, by name.\n")
	}
	if len(crdCluster) > 0 {
		fmt.Fprintf(&b, "# With apply.crds: %s, also what applying the chart's CRDs needs: create on\n"+
			"# customresourcedefinitions, and get, list, watch and patch on exactly the chart's.\n", opts.CRDPolicy)
	}
	for _, d := range docs {
		data, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte("  creationTimestamp: null\n"), nil)
		b.WriteString("---\n")
		b.Write(data)
	}
	return []byte(strings.TrimRight(b.String(), "\n") + "\n"), nil
}
