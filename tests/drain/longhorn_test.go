package drain

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/chart-upgrader/chart-upgrader/internal/drainpredict"
)

// This file plays Longhorn v1.7 on the test's nodes, its objects shaped
// as longhorn-manager makes them (types.GetInstanceManagerLabels, the
// instance manager controller's pod and budget, replicas with their
// healthyAt and instance manager), the test's namespace standing for
// longhorn-system; and, for the real drain, the instance manager
// controller's handling of its budget on a cordoned node (longhorn-manager
// v1.7.3 controller/instance_manager_controller.go syncInstanceManagerPDB
// and canDeleteInstanceManagerPDB), written here from that code.

var (
	imGVR      = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "instancemanagers"}
	replicaGVR = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "replicas"}
	settingGVR = schema.GroupVersionResource{Group: "longhorn.io", Version: "v1beta2", Resource: "settings"}
)

const imImage = "longhornio/longhorn-instance-manager:v1.7.3"

func imLabels(node string) map[string]string {
	return map[string]string{
		"longhorn.io/managed-by": "longhorn-manager", "longhorn.io/component": "instance-manager",
		"longhorn.io/instance-manager-type": "aio", "longhorn.io/node": node,
		"longhorn.io/instance-manager-image": "imi-8f9e7d6c", "longhorn.io/data-engine": "v1",
	}
}

// instanceManager makes node's aio instance manager, running, with its
// pod and its budget; replicas are the names of the replicas it runs.
func (f *fixture) instanceManager(node string) string {
	f.t.Helper()
	ctx := f.t.Context()
	name := "instance-manager-" + fmt.Sprintf("%x", []byte(node))[:8] + node[len(node)-1:]
	im := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "InstanceManager",
		"metadata": map[string]any{"name": name, "namespace": f.ns, "labels": toAny(imLabels(node))},
		"spec":     map[string]any{"nodeID": node, "type": "aio", "image": imImage, "dataEngine": "v1"},
		"status":   map[string]any{"currentState": "running", "instanceEngines": map[string]any{}, "instanceReplicas": map[string]any{}},
	}}
	created := f.createWithStatus(imGVR, im)
	yes := true
	spec := f.podSpec([]string{node}, false, "")
	spec.NodeName, spec.Affinity = node, nil
	spec.RestartPolicy = corev1.RestartPolicyNever
	spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	_, err := f.kube.CoreV1().Pods(f.ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: imLabels(node), OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "longhorn.io/v1beta2", Kind: "InstanceManager", Name: name, UID: created.GetUID(), Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: spec,
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	one := intstr.FromInt32(1)
	_, err = f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Create(ctx, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: imLabels(node)}},
	}, metav1.CreateOptions{})
	require.NoError(f.t, err)
	return name
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// replica makes a replica of volume on node, run by instance manager im,
// healthy (it has been) and running unless stopped.
func (f *fixture) replica(name, volume, node, im string, stopped bool) {
	f.t.Helper()
	state := "running"
	if stopped {
		state = "stopped"
	}
	r := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Replica",
		"metadata": map[string]any{"name": name, "namespace": f.ns, "labels": map[string]any{"longhornvolume": volume, "longhornnode": node}},
		"spec": map[string]any{"nodeID": node, "volumeName": volume, "healthyAt": "2026-12-01T10:00:00Z", "failedAt": "",
			"desireState": state, "image": imImage, "dataEngine": "v1"},
		"status": map[string]any{"currentState": state, "instanceManagerName": im},
	}}
	f.createWithStatus(replicaGVR, r)
}

// createWithStatus creates u, then writes its status (Longhorn's kinds
// have a status subresource: a create drops the status).
func (f *fixture) createWithStatus(gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	f.t.Helper()
	status := u.Object["status"]
	created, err := f.env.Dynamic().Resource(gvr).Namespace(f.ns).Create(f.t.Context(), u, metav1.CreateOptions{})
	require.NoError(f.t, err)
	created.Object["status"] = status
	updated, err := f.env.Dynamic().Resource(gvr).Namespace(f.ns).UpdateStatus(f.t.Context(), created, metav1.UpdateOptions{})
	require.NoError(f.t, err)
	return updated
}

// drainPolicy sets Longhorn's node-drain-policy.
func (f *fixture) drainPolicy(value string) {
	f.t.Helper()
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "longhorn.io/v1beta2", "kind": "Setting",
		"metadata": map[string]any{"name": "node-drain-policy", "namespace": f.ns}, "value": value,
	}}
	_, err := f.env.Dynamic().Resource(settingGVR).Namespace(f.ns).Create(f.t.Context(), s, metav1.CreateOptions{})
	require.NoError(f.t, err)
}

// longhornManager runs, until the test ends, the instance manager
// controller's budget handling: on a cordoned node, the budget of its
// instance manager is deleted once canDeleteInstanceManagerPDB holds.
func (f *fixture) longhornManager() {
	ctx := f.t.Context()
	go func() {
		for ctx.Err() == nil {
			time.Sleep(200 * time.Millisecond)
			ims, err := f.env.Dynamic().Resource(imGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				continue
			}
			for _, im := range ims.Items {
				node, _, _ := unstructured.NestedString(im.Object, "spec", "nodeID")
				n, err := f.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
				if err != nil || !n.Spec.Unschedulable {
					continue
				}
				if f.canDeleteIMBudget(ctx, &im) {
					_ = f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Delete(ctx, im.GetName(), metav1.DeleteOptions{})
				}
			}
		}
	}()
}

// canDeleteIMBudget is longhorn-manager's canDeleteInstanceManagerPDB for
// an aio instance manager.
func (f *fixture) canDeleteIMBudget(ctx context.Context, im *unstructured.Unstructured) bool {
	engines, _, _ := unstructured.NestedMap(im.Object, "status", "instanceEngines")
	if len(engines) > 0 {
		return false
	}
	node, _, _ := unstructured.NestedString(im.Object, "spec", "nodeID")
	policy := "block-if-contains-last-replica"
	if s, err := f.env.Dynamic().Resource(settingGVR).Namespace(f.ns).Get(ctx, "node-drain-policy", metav1.GetOptions{}); err == nil {
		policy, _, _ = unstructured.NestedString(s.Object, "value")
	}
	if policy == "always-allow" {
		return true
	}
	rs, err := f.env.Dynamic().Resource(replicaGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, r := range rs.Items {
		if n, _, _ := unstructured.NestedString(r.Object, "spec", "nodeID"); n != node {
			continue
		}
		desire, _, _ := unstructured.NestedString(r.Object, "spec", "desireState")
		current, _, _ := unstructured.NestedString(r.Object, "status", "currentState")
		if policy == "allow-if-replica-is-stopped" && desire == "stopped" && current == "stopped" {
			continue
		}
		vol, _, _ := unstructured.NestedString(r.Object, "spec", "volumeName")
		protected := false
		for _, o := range rs.Items {
			on, _, _ := unstructured.NestedString(o.Object, "spec", "nodeID")
			ov, _, _ := unstructured.NestedString(o.Object, "spec", "volumeName")
			healthy, _, _ := unstructured.NestedString(o.Object, "spec", "healthyAt")
			failed, _, _ := unstructured.NestedString(o.Object, "spec", "failedAt")
			if ov != vol || on == node || healthy == "" || failed != "" {
				continue
			}
			if n, err := f.kube.CoreV1().Nodes().Get(ctx, on, metav1.GetOptions{}); err != nil || n.Spec.Unschedulable {
				continue
			}
			oim, _, _ := unstructured.NestedString(o.Object, "status", "instanceManagerName")
			if _, err := f.kube.PolicyV1().PodDisruptionBudgets(f.ns).Get(ctx, oim, metav1.GetOptions{}); err == nil {
				protected = true
			}
		}
		if !protected {
			return false
		}
	}
	return true
}

// TestLonghorn: the instance manager's budget with a volume's last
// healthy replica on the node, and with one elsewhere, under two
// node-drain-policy values, against the real drain.
func TestLonghorn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		policy    string // "" leaves Longhorn's default
		elsewhere bool   // a healthy replica of the volume on b
		stopped   bool   // the replica on a is stopped
		want      []string
	}{
		{"the last replica, the default policy", "", false, false,
			[]string{"node-drain-policy block-if-contains-last-replica: Longhorn keeps instance manager", "last healthy replica of pvc-data (replica pvc-data-r-a)"}},
		{"control: a healthy replica elsewhere, the default policy", "", true, false, nil},
		{"the last replica, running, allow-if-replica-is-stopped", "allow-if-replica-is-stopped", false, false,
			[]string{"node-drain-policy allow-if-replica-is-stopped"}},
		{"control: the last replica, stopped, allow-if-replica-is-stopped", "allow-if-replica-is-stopped", false, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 2)
			if tc.policy != "" {
				f.drainPolicy(tc.policy)
			}
			imA := f.instanceManager(f.nodes[0])
			imB := f.instanceManager(f.nodes[1])
			f.replica("pvc-data-r-a", "pvc-data", f.nodes[0], imA, tc.stopped)
			if tc.elsewhere {
				f.replica("pvc-data-r-b", "pvc-data", f.nodes[1], imB, false)
			}
			f.waitPods("longhorn.io/component=instance-manager", 2, true)
			f.waitBudget(imA, 1)
			f.longhornManager()
			d := drainpredict.Drain{IgnoreDaemonSets: true, DeleteEmptyDirData: true}
			p := f.predict(f.nodes[0], d)
			f.agree(p, f.kubectlDrain(f.nodes[0], d), tc.want...)
		})
	}
}
