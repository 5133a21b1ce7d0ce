package drainpredict

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/placement"
)

// kubevirtRule is KubeVirt's say on a virt-launcher pod's eviction
// (kubevirt v1.3: virt-api's pod-eviction admitter, virt-controller's
// disruption budgets and evacuation, virt-handler's LiveMigratable
// condition), where its CRDs are served. The VMI's effective eviction
// strategy (its own, else the KubeVirt CR's, else None) decides:
// LiveMigrate on a VMI whose LiveMigratable condition is not True is
// refused (429) on every try; External waits until something else moves
// the VMI; None, and LiveMigrateIfPossible on a VMI that cannot migrate,
// shut the VM down (a warning); a migratable VMI under LiveMigrate or
// LiveMigrateIfPossible is migrated, its pod then ends and goes,
// provided the target pod fits another node. The rule judges the budget
// of every virt-launcher pod of a VMI (KubeVirt's own); virt-api's
// webhook is still asked, but for a VM that migrates, whose first 429 is
// a step of the migration.
type kubevirtRule struct{}

func (kubevirtRule) Name() string { return "kubevirt" }

func (kubevirtRule) Reads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{"kubevirt.io"}, Resources: []string{vmisResource.Resource, kubevirtResource.Resource}, Verbs: []string{"list"}}}
}

var (
	vmisResource     = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "virtualmachineinstances"}
	kubevirtResource = schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
)

// KubeVirt's eviction strategies.
const (
	evictionNone        = "None"
	evictionLiveMigrate = "LiveMigrate"
	evictionIfPossible  = "LiveMigrateIfPossible"
	evictionExternal    = "External"
	launcherLabel       = "kubevirt.io"
	launcherValue       = "virt-launcher"
	createdByLabel      = "kubevirt.io/created-by"
	liveMigratableCond  = "LiveMigratable"
)

func (kubevirtRule) Judge(ctx context.Context, w *World, p *Prediction) error {
	var launchers []*corev1.Pod
	for i := range w.Evict {
		if w.Evict[i].Labels[launcherLabel] == launcherValue {
			launchers = append(launchers, &w.Evict[i])
		}
	}
	if len(launchers) == 0 {
		return nil
	}
	vmis, served, err := w.Custom(ctx, vmisResource)
	if err != nil || !served {
		if err == nil && w.c.Dynamic == nil {
			w.notCheck("KubeVirt's VMs not judged: no dynamic client")
		}
		return err
	}
	kvs, _, err := w.Custom(ctx, kubevirtResource)
	if err != nil {
		return err
	}
	clusterStrategy := ""
	for _, kv := range kvs {
		if s, ok, _ := unstructured.NestedString(kv.Object, "spec", "configuration", "evictionStrategy"); ok && s != "" {
			clusterStrategy = s
		}
	}
	byUID := map[string]*unstructured.Unstructured{}
	for i := range vmis {
		byUID[string(vmis[i].GetUID())] = &vmis[i]
	}
	for _, pod := range launchers {
		vmi := byUID[pod.Labels[createdByLabel]]
		if vmi == nil {
			continue // a launcher of a VMI that is gone: the webhook lets it go
		}
		vm := vmi.GetNamespace() + "/" + vmi.GetName()
		strategy, _, _ := unstructured.NestedString(vmi.Object, "spec", "evictionStrategy")
		from := "the VMI's"
		if strategy == "" {
			strategy, from = clusterStrategy, "the KubeVirt CR's"
		}
		if strategy == "" {
			strategy, from = evictionNone, "KubeVirt's default"
		}
		migratable, reason, message := liveMigratable(vmi)
		w.claim(pod, "kubevirt") // its budget is KubeVirt's: judged here
		f := Finding{Rule: "kubevirt", Pod: podName(pod), Owner: "VirtualMachineInstance/" + vmi.GetName()}
		if w.opts.Drain.DisableEviction {
			f.Why = fmt.Sprintf("VM %s is shut down: the drain deletes its pod without eviction (disableEviction), so it is not migrated", vm)
			p.warn(f)
			continue
		}
		switch {
		case strategy == evictionLiveMigrate && !migratable:
			f.Why = fmt.Sprintf("VMI %s has evictionStrategy LiveMigrate (%s) and cannot live-migrate (LiveMigratable %s: %s): virt-api's webhook answers 429 to every eviction and its budget allows none",
				vm, from, reason, message)
			f.Unblock = "stop the VM before the upgrade, or remove what keeps it from migrating (" + reason + "), or set its evictionStrategy to LiveMigrateIfPossible or None to let the drain shut it down"
			p.block(f)
		case strategy == evictionExternal:
			f.Why = fmt.Sprintf("VMI %s has evictionStrategy External (%s): the eviction only marks it for evacuation, and its budget holds the drain until something else moves or stops it", vm, from)
			f.Unblock = "have the external controller move the VMI, or stop the VM"
			p.block(f)
		case (strategy == evictionLiveMigrate || strategy == evictionIfPossible) && migratable:
			w.move(pod)
			if why, err := placeMigrationTarget(ctx, w, pod); err != nil {
				return err
			} else if why != "" {
				f.Why = fmt.Sprintf("VMI %s would live-migrate (evictionStrategy %s), but its target pod fits no other node: %s", vm, strategy, why)
				f.Unblock = "make room on another node for the VM, or stop it"
				p.block(f)
			}
		default: // None, or IfPossible and not migratable
			f.Why = fmt.Sprintf("VM %s is shut down by the drain (evictionStrategy %s, %s; LiveMigratable %s)", vm, strategy, from, orTrue(migratable, reason))
			p.warn(f)
		}
	}
	return nil
}

// liveMigratable reads the VMI's LiveMigratable condition: True, or its
// reason and message.
func liveMigratable(vmi *unstructured.Unstructured) (bool, string, string) {
	conds, _, _ := unstructured.NestedSlice(vmi.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != liveMigratableCond {
			continue
		}
		reason, _ := m["reason"].(string)
		message, _ := m["message"].(string)
		return m["status"] == "True", reason, message
	}
	return false, "NoCondition", "the VMI reports no LiveMigratable condition"
}

func orTrue(ok bool, reason string) string {
	if ok {
		return "True"
	}
	return "False: " + reason
}

// placeMigrationTarget places the migration's target pod (the launcher
// pod, unbound) with the scheduler's filters: why it fits no other node,
// "" when it fits.
func placeMigrationTarget(ctx context.Context, w *World, pod *corev1.Pod) (string, error) {
	infos, err := w.nodeInfos(ctx)
	if err != nil {
		return "", err
	}
	filters, err := placement.Filters(ctx)
	if err != nil {
		return "", fmt.Errorf("building the scheduler's filters: %w", err)
	}
	target := replacementOf(pod, 0)
	ni, err := placement.Schedule(ctx, filters, target, infos)
	if err != nil {
		return err.Error(), nil
	}
	ni.AddPod(target)
	return "", nil
}
