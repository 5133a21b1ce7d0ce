package drain

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
)

// This file plays KubeVirt v1.3 on the test's nodes, as its components
// shape the objects (FACTS of docs/design.md's drain section; kubevirt
// pkg/virt-api/webhooks/validating-webhook/admitters/pod-eviction-
// admitter.go, pkg/virt-controller/watch/drain): VMIs and their
// virt-launcher pods and budgets made as virt-controller makes them, the
// eviction webhook answering as virt-api's does (on loopback), and a
// small operator that migrates a VMI the eviction marked, as the
// evacuation controller and virt-handler together do.

var (
	vmiGVR = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	kvGVR  = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
)

// vmiSpec is one VMI of a case.
type vmiSpec struct {
	name       string
	strategy   string // spec.evictionStrategy; "" leaves it unset
	migratable bool
	reason     string // LiveMigratable's reason when not migratable
}

// launcherEmptyDirs are the emptyDir volumes of every virt-launcher pod
// (virt-controller's services/rendervolumes.go).
var launcherEmptyDirs = []string{"private", "public", "sockets", "virt-bin-share-dir", "libvirt-runtime", "ephemeral-disks", "container-disks"}

// vmi creates the VMI on node, its virt-launcher pod, and the budget
// virt-controller gives it (LiveMigrate and External always;
// LiveMigrateIfPossible when migratable).
func (f *fixture) vmi(v vmiSpec, node string) *unstructured.Unstructured {
	f.t.Helper()
	ctx := f.t.Context()
	cond := map[string]any{"type": "LiveMigratable", "status": "True"}
	if !v.migratable {
		cond = map[string]any{"type": "LiveMigratable", "status": "False", "reason": v.reason,
			"message": "cannot migrate VMI: PVC " + v.name + "-disk is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"}
	}
	spec := map[string]any{"domain": map[string]any{"devices": map[string]any{}}}
	if v.strategy != "" {
		spec["evictionStrategy"] = v.strategy
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
		"metadata": map[string]any{"name": v.name, "namespace": f.ns, "labels": map[string]any{"kubevirt.io/nodeName": node}},
		"spec":     spec,
		"status": map[string]any{"nodeName": node, "phase": "Running", "conditions": []any{cond,
			map[string]any{"type": "Ready", "status": "True"}}},
	}}
	created, err := f.env.Dynamic().Resource(vmiGVR).Namespace(f.ns).Create(ctx, u, metav1.CreateOptions{})
	require.NoError(f.t, err)
	f.launcher(created, node, "")
	effective := v.strategy
	if effective == "LiveMigrate" || effective == "External" || (effective == "LiveMigrateIfPossible" && v.migratable) {
		yes := true
		_, err := f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "kubevirt-disruption-budget-", OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: v.name, UID: created.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
			Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptrTo(intstr.FromInt32(1)),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubevirt.io/created-by": string(created.GetUID())}}},
		}, metav1.CreateOptions{})
		require.NoError(f.t, err)
	}
	return created
}

func ptrTo[T any](v T) *T { return &v }

// launcher creates a virt-launcher pod of vmi bound to node (suffix
// tells a migration's target from the first).
func (f *fixture) launcher(vmi *unstructured.Unstructured, node, suffix string) {
	f.t.Helper()
	yes := true
	spec := f.podSpec([]string{node}, false, "")
	spec.NodeName = node
	spec.Affinity = nil
	for _, v := range launcherEmptyDirs {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	_, err := f.kube.CoreV1().Pods(f.ns).Create(f.t.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-launcher-" + vmi.GetName() + suffix + "-",
			Labels:      map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(vmi.GetUID()), "vm.kubevirt.io/name": vmi.GetName()},
			Annotations: map[string]string{"kubevirt.io/domain": vmi.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi.GetName(),
				UID: vmi.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

// virtAPI installs, for the test's namespace, a pods/eviction webhook that
// answers as virt-api's pod-eviction admitter, and returns once the API
// server calls it.
func (f *fixture) virtAPI() {
	t := f.t
	ctx := t.Context()
	var calls atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = f.admitEviction(context.Background(), review.Request)
		review.Response.UID = review.Request.UID
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/launcher-eviction-validate"
	ignore, noneOnDryRun := admissionregistrationv1.Ignore, admissionregistrationv1.SideEffectClassNoneOnDryRun
	name := "virt-api-validator-" + f.ns
	hooks := f.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err := hooks.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "virt-launcher-eviction-interceptor.kubevirt.io", FailurePolicy: &ignore, SideEffects: &noneOnDryRun,
			AdmissionReviewVersions: []string{"v1", "v1beta1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			// virt-api's selects every namespace: this one its test's
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": f.ns}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods/eviction"}},
			}},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// the API server loads webhooks from an informer: wait until it calls
	// this one (a dry-run eviction of a pod that does not exist)
	require.Eventually(t, func() bool {
		_ = f.kube.PolicyV1().Evictions(f.ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: f.ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		return calls.Load() > 0
	}, 30*time.Second, 100*time.Millisecond, "the eviction webhook is called")
}

// admitEviction is virt-api's pod-eviction admitter (v1.3.1).
func (f *fixture) admitEviction(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	pod, err := f.kube.CoreV1().Pods(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil || pod.Labels["kubevirt.io"] != "virt-launcher" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return allow
	}
	domain := pod.Annotations["kubevirt.io/domain"]
	if domain == "" {
		return allow
	}
	vmis := f.env.Dynamic().Resource(vmiGVR).Namespace(req.Namespace)
	vmi, err := vmis.Get(ctx, domain, metav1.GetOptions{})
	if err != nil {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusBadRequest, Message: err.Error()}}
	}
	strategy, _, _ := unstructured.NestedString(vmi.Object, "spec", "evictionStrategy")
	if strategy == "" {
		kvs, err := f.env.Dynamic().Resource(kvGVR).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, kv := range kvs.Items {
				if s, ok, _ := unstructured.NestedString(kv.Object, "spec", "configuration", "evictionStrategy"); ok {
					strategy = s
				}
			}
		}
	}
	if strategy == "" {
		return allow
	}
	migratable := false
	conds, _, _ := unstructured.NestedSlice(vmi.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == "LiveMigratable" && m["status"] == "True" {
			migratable = true
		}
	}
	deny := func(msg string) *admissionv1.AdmissionResponse {
		return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusTooManyRequests, Message: msg}}
	}
	switch {
	case strategy == "LiveMigrate" && !migratable:
		return deny(fmt.Sprintf("VMI %s is configured with an eviction strategy but is not live-migratable", vmi.GetName()))
	case (strategy == "LiveMigrate" || strategy == "LiveMigrateIfPossible") && migratable, strategy == "External":
		marked, _, _ := unstructured.NestedString(vmi.Object, "status", "evacuationNodeName")
		node, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
		if marked == "" && node == pod.Spec.NodeName {
			patch := fmt.Sprintf(`[{"op":"add","path":"/status/evacuationNodeName","value":%q}]`, node)
			opts := metav1.PatchOptions{}
			if req.DryRun != nil && *req.DryRun {
				opts.DryRun = []string{metav1.DryRunAll}
			}
			if _, err := vmis.Patch(ctx, vmi.GetName(), types.JSONPatchType, []byte(patch), opts); err != nil {
				return &admissionv1.AdmissionResponse{Result: &metav1.Status{Code: http.StatusBadRequest, Message: err.Error()}}
			}
			return deny(fmt.Sprintf("Eviction triggered evacuation of VMI %s/%s", vmi.GetNamespace(), vmi.GetName()))
		}
	}
	return allow
}

// migrateMarked runs until the test ends: a VMI the eviction marked for
// evacuation (LiveMigrate or LiveMigrateIfPossible, migratable) is
// migrated to target: its new virt-launcher pod there, its status moved,
// the source pod gone (the source virt-launcher ends once the migration
// is done).
func (f *fixture) migrateMarked(target string) {
	ctx := f.t.Context()
	vmis := f.env.Dynamic().Resource(vmiGVR).Namespace(f.ns)
	go func() {
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			l, err := vmis.List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for i := range l.Items {
				vmi := &l.Items[i]
				marked, _, _ := unstructured.NestedString(vmi.Object, "status", "evacuationNodeName")
				strategy, _, _ := unstructured.NestedString(vmi.Object, "spec", "evictionStrategy")
				if marked == "" || strategy == "External" {
					continue
				}
				pods, err := f.kube.CoreV1().Pods(f.ns).List(ctx, metav1.ListOptions{LabelSelector: "kubevirt.io/created-by=" + string(vmi.GetUID())})
				if err != nil {
					continue
				}
				f.launcherOn(vmi, target)
				_ = unstructured.SetNestedField(vmi.Object, target, "status", "nodeName")
				unstructured.RemoveNestedField(vmi.Object, "status", "evacuationNodeName")
				if _, err := vmis.Update(ctx, vmi, metav1.UpdateOptions{}); err != nil {
					continue
				}
				for _, p := range pods.Items {
					if p.Spec.NodeName == marked {
						_ = f.kube.CoreV1().Pods(f.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
					}
				}
			}
		}
	}()
}

// launcherOn is launcher without the test's assertions (from a goroutine).
func (f *fixture) launcherOn(vmi *unstructured.Unstructured, node string) {
	yes := true
	spec := f.podSpec([]string{node}, false, "")
	spec.NodeName, spec.Affinity = node, nil
	_, _ = f.kube.CoreV1().Pods(f.ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "virt-launcher-" + vmi.GetName() + "-target-",
			Labels:      map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(vmi.GetUID())},
			Annotations: map[string]string{"kubevirt.io/domain": vmi.GetName()},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: vmi.GetName(),
				UID: vmi.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: spec,
	}, metav1.CreateOptions{})
}

// TestKubeVirt: VMIs under each eviction strategy, against the real
// drain through virt-api's webhook and KubeVirt's budgets.
func TestKubeVirt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		vmi  vmiSpec
		want []string
		warn string
	}{
		{"LiveMigrate, not live-migratable", vmiSpec{name: "db", strategy: "LiveMigrate", reason: "DisksNotLiveMigratable"},
			[]string{"VMI %ns/db has evictionStrategy LiveMigrate (the VMI's) and cannot live-migrate (LiveMigratable DisksNotLiveMigratable: cannot migrate VMI: PVC db-disk is not shared",
				"admission webhook virt-launcher-eviction-interceptor.kubevirt.io refuses the eviction for now (429", "is configured with an eviction strategy but is not live-migratable"}, ""},
		{"control: LiveMigrate, migratable: migrated when the eviction asks", vmiSpec{name: "web", strategy: "LiveMigrate", migratable: true}, nil, ""},
		{"External", vmiSpec{name: "ext", strategy: "External", migratable: true},
			[]string{"VMI %ns/ext has evictionStrategy External (the VMI's)"}, ""},
		{"control: LiveMigrateIfPossible, not migratable: shut down", vmiSpec{name: "tmp", strategy: "LiveMigrateIfPossible", reason: "HostDeviceNotLiveMigratable"}, nil,
			"VM %ns/tmp is shut down by the drain (evictionStrategy LiveMigrateIfPossible, the VMI's; LiveMigratable False: HostDeviceNotLiveMigratable)"},
		{"control: None: shut down", vmiSpec{name: "scratch", strategy: "None", migratable: true}, nil,
			"VM %ns/scratch is shut down by the drain (evictionStrategy None"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 2)
			f.virtAPI()
			f.migrateMarked(f.nodes[1])
			f.vmi(tc.vmi, f.nodes[0])
			f.waitPods("kubevirt.io=virt-launcher", 1, true)
			d := drainpredict.Drain{IgnoreDaemonSets: true, DeleteEmptyDirData: true}
			p := f.predict(f.nodes[0], d)
			if tc.warn != "" {
				var ws []string
				for _, w := range p.Warnings {
					ws = append(ws, w.String())
				}
				assert.Contains(t, fmt.Sprint(ws), replaceNS(tc.warn, f.ns))
			}
			err := f.kubectlDrain(f.nodes[0], d)
			var want []string
			for _, w := range tc.want {
				want = append(want, replaceNS(w, f.ns))
			}
			f.agree(p, err, want...)
			if tc.want == nil && tc.vmi.strategy == "LiveMigrate" {
				vmi, err := f.env.Dynamic().Resource(vmiGVR).Namespace(f.ns).Get(t.Context(), tc.vmi.name, metav1.GetOptions{})
				require.NoError(t, err)
				node, _, _ := unstructured.NestedString(vmi.Object, "status", "nodeName")
				assert.Equal(t, f.nodes[1], node, "the VMI migrated")
			}
		})
	}
}

var _ = apierrors.IsNotFound
