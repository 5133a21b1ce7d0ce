package drainpredict

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// BenchmarkPredict is the size: a node with 110 pods in a
// cluster of 6 nodes with 300 budgets, 50 VMIs and 500 Longhorn replicas,
// served by client-go's fake clients (the tool's own time, no API
// server): kubectl's filters, the budgets (some whose replacements the
// scheduler's filters place), KubeVirt and Longhorn judged.
func BenchmarkPredict(b *testing.B) {
	kube, dyn := benchCluster()
	ctx := context.Background()
	var requests int
	b.ReportAllocs()
	for b.Loop() {
		p, err := Predict(ctx, Clients{Kube: kube, Dynamic: dyn}, Options{Node: "n0", Drain: Drain{IgnoreDaemonSets: true, DeleteEmptyDirData: true}})
		if err != nil {
			b.Fatal(err)
		}
		if p.Evicted != 90 {
			b.Fatalf("evicted %d, want 90 (110 less 20 DaemonSet pods)", p.Evicted)
		}
		requests = p.Requests
	}
	b.ReportMetric(float64(requests), "requests/op")
}

func benchCluster() (*fake.Clientset, *dynamicfake.FakeDynamicClient) {
	var objs []runtime.Object
	yes := true
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("64"), corev1.ResourceMemory: resource.MustParse("256Gi"), corev1.ResourcePods: resource.MustParse("250")}
	for i := range 6 {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i), Labels: map[string]string{"kubernetes.io/hostname": fmt.Sprintf("n%d", i)}},
			Status: corev1.NodeStatus{Allocatable: capacity, Capacity: capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}})
	}
	ready := corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	pod := func(ns, name, node string, labels map[string]string, owner metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: labels, OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "r/x:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}, Status: ready}
	}
	// 300 budgets over 300 apps of 3 replicas in 30 namespaces; 25 of the
	// apps have 2 pods on n0 (budget allows 1: a replacement is placed), 15 one
	n0 := 0
	for i := range 300 {
		ns, app := fmt.Sprintf("ns%d", i%30), fmt.Sprintf("app%d", i)
		objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app, Generation: 1},
			Spec:   policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &intstr.IntOrString{IntVal: 1}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
			Status: policyv1.PodDisruptionBudgetStatus{ObservedGeneration: 1, DisruptionsAllowed: 1, CurrentHealthy: 3, DesiredHealthy: 2, ExpectedPods: 3}})
		owner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-rs", Controller: &yes}
		for r := range 3 {
			node := fmt.Sprintf("n%d", 1+(i+r)%5)
			if i < 25 && r < 2 || i >= 25 && i < 40 && r == 0 {
				node = "n0"
				n0++
			}
			objs = append(objs, pod(ns, fmt.Sprintf("%s-%d", app, r), node, map[string]string{"app": app}, owner))
		}
	}
	// 20 DaemonSet pods on n0
	for i := range 20 {
		ds := fmt.Sprintf("ds%d", i)
		objs = append(objs, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ds}})
		objs = append(objs, pod("kube-system", ds+"-n0", "n0", map[string]string{"ds": ds}, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: ds, Controller: &yes}))
	}
	// 50 VMIs, 24 on n0; one Longhorn instance manager per node, 500 replicas
	var custom []runtime.Object
	for i := range 50 {
		node := fmt.Sprintf("n%d", i%5+1)
		if i < 24 {
			node = "n0"
		}
		uid := types.UID(fmt.Sprintf("vmi-%d", i))
		vmi := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
			"metadata": map[string]any{"namespace": "vms", "name": fmt.Sprintf("vm%d", i), "uid": string(uid)},
			"spec":     map[string]any{"evictionStrategy": "LiveMigrate"},
			"status":   map[string]any{"nodeName": node, "conditions": []any{map[string]any{"type": "LiveMigratable", "status": "True"}}}}}
		custom = append(custom, vmi)
		p := pod("vms", fmt.Sprintf("virt-launcher-vm%d", i), node, map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(uid)},
			metav1.OwnerReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachineInstance", Name: fmt.Sprintf("vm%d", i), Controller: &yes})
		p.Spec.Volumes = []corev1.Volume{{Name: "private", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		objs = append(objs, p)
		if node == "n0" {
			n0++
		}
	}
	for i := range 6 {
		im := fmt.Sprintf("instance-manager-n%d", i)
		custom = append(custom, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
			"metadata": map[string]any{"namespace": "longhorn-system", "name": im},
			"spec":     map[string]any{"nodeID": fmt.Sprintf("n%d", i), "type": "aio"}, "status": map[string]any{"currentState": "running"}}})
		objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "longhorn-system", Name: im},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"longhorn.io/node": fmt.Sprintf("n%d", i)}}}})
		if i == 0 {
			objs = append(objs, pod("longhorn-system", im, "n0", map[string]string{"longhorn.io/component": "instance-manager", "longhorn.io/node": "n0"},
				metav1.OwnerReference{APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Name: im, Controller: &yes}))
			n0++
		}
	}
	for i := range 500 {
		vol := fmt.Sprintf("pvc-%d", i/3)
		node := fmt.Sprintf("n%d", i%6)
		custom = append(custom, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
			"metadata": map[string]any{"namespace": "longhorn-system", "name": fmt.Sprintf("%s-r-%d", vol, i)},
			"spec":     map[string]any{"nodeID": node, "volumeName": vol, "healthyAt": "2026-12-01T00:00:00Z", "failedAt": ""},
			"status":   map[string]any{"currentState": "running", "instanceManagerName": "instance-manager-" + node}}})
	}
	if n0 != 110-20 {
		panic(fmt.Sprintf("%d pods on n0 beside the DaemonSets', want 90", n0))
	}
	kube := fake.NewClientset(objs...)
	// the fake lists ignore field selectors: spec.nodeName and the phase
	// ones are applied here, as the API server does
	kube.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		if sel == nil || sel.Empty() {
			return false, nil, nil
		}
		all, err := kube.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := all.(*corev1.PodList)
		out := &corev1.PodList{}
		for _, p := range list.Items {
			if sel.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
				out.Items = append(out.Items, p)
			}
		}
		return true, out, nil
	})
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
		vmisResource: "VirtualMachineInstanceList", kubevirtResource: "KubeVirtList", lhInstanceManagers: "InstanceManagerList",
		lhReplicas: "ReplicaList", lhSettings: "SettingList", lhVolumes: "VolumeList", plansResource: "PlanList",
	}, custom...)
	return kube, dyn
}
