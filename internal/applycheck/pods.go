package applycheck

import (
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// This file finds the pods an upgrade makes: the workloads of the new
// chart whose pod template or replica count differ from what the
// deployed revision rendered, and the new ones. The checks of what stops
// pods after the apply (Pod Security, LimitRange, quota, scheduling)
// judge them; a workload the upgrade leaves as it was makes no pod.

// Rollout is one workload of the new chart that makes pods in the
// upgrade.
type Rollout struct {
	Object    string // Kind namespace/name
	Kind      string
	Namespace string
	Name      string
	// Template is the pod template as the chart renders it (its
	// namespace set), with Replicas the pods it runs at the end of the
	// rollout (a DaemonSet's: one per node it runs on, 0 here; a Job's
	// and CronJob's: its parallelism) and Surge the pods beyond them at
	// its peak (a Deployment's maxSurge).
	Template *corev1.PodTemplateSpec
	Replicas int64
	Surge    int64
	// Selector selects the workload's pods (nil for a Job, a CronJob and
	// a Pod).
	Selector *metav1.LabelSelector
	// Old is the template of the deployed revision, nil for a new
	// workload, with OldReplicas its replicas: the pods the rollout
	// replaces.
	Old         *corev1.PodTemplateSpec
	OldReplicas int64
	// Scale: the template is the deployed one, only the replicas grow;
	// the pods there stay, and Replicas-OldReplicas are added.
	Scale bool
}

// Pod is a pod of r's new template, as its controller makes it.
func (r Rollout) Pod() *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: *r.Template.ObjectMeta.DeepCopy(), Spec: *r.Template.Spec.DeepCopy()}
	p.Namespace = r.Namespace
	if p.Name == "" {
		p.Name = r.Name
	}
	return p
}

// rollouts are the workloads of s's new chart that make pods, in manifest
// order, worked out once per check of a manifest.
func (s Scope) rollouts() []Rollout {
	return s.Memo("rollouts", func() any {
		olds := map[string]*unstructured.Unstructured{}
		for _, o := range s.Olds {
			olds[identity(o, s.Request.Namespace)] = o
		}
		var out []Rollout
		for _, o := range s.Objects {
			r, ok := Workload(o, s.Request.Namespace)
			if !ok {
				continue
			}
			if old, found := olds[identity(o, s.Request.Namespace)]; found {
				if or, ok := Workload(old, s.Request.Namespace); ok {
					if reflect.DeepEqual(or.Template, r.Template) && or.Replicas >= r.Replicas {
						continue // no new pod
					}
					r.Old, r.OldReplicas = or.Template, or.Replicas
					r.Scale = reflect.DeepEqual(or.Template, r.Template)
				}
			}
			out = append(out, r)
		}
		return out
	}).([]Rollout)
}

// Workload reads o as a workload: its pod template, replicas and surge;
// false for an object that makes no pods (or that does not decode).
func Workload(o *unstructured.Unstructured, releaseNamespace string) (Rollout, bool) {
	ns := o.GetNamespace()
	if ns == "" {
		ns = releaseNamespace
	}
	r := Rollout{Kind: o.GetKind(), Namespace: ns, Name: o.GetName(), Object: fmt.Sprintf("%s %s/%s", o.GetKind(), ns, o.GetName()), Replicas: 1}
	gvk := o.GroupVersionKind()
	from := func(into any) bool {
		return runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into) == nil
	}
	switch {
	case gvk.Group == "apps" && gvk.Kind == "Deployment":
		var d appsv1.Deployment
		if !from(&d) {
			return r, false
		}
		r.Template, r.Replicas, r.Selector = &d.Spec.Template, replicas(d.Spec.Replicas), d.Spec.Selector
		if d.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			surge := intstr.FromString("25%")
			if d.Spec.Strategy.RollingUpdate != nil && d.Spec.Strategy.RollingUpdate.MaxSurge != nil {
				surge = *d.Spec.Strategy.RollingUpdate.MaxSurge
			}
			n, err := intstr.GetScaledValueFromIntOrPercent(&surge, int(r.Replicas), true)
			if err == nil {
				r.Surge = int64(n)
			}
		}
	case gvk.Group == "apps" && gvk.Kind == "StatefulSet":
		var st appsv1.StatefulSet
		if !from(&st) {
			return r, false
		}
		r.Template, r.Replicas, r.Selector = &st.Spec.Template, replicas(st.Spec.Replicas), st.Spec.Selector
	case gvk.Group == "apps" && gvk.Kind == "ReplicaSet":
		var rs appsv1.ReplicaSet
		if !from(&rs) {
			return r, false
		}
		r.Template, r.Replicas, r.Selector = &rs.Spec.Template, replicas(rs.Spec.Replicas), rs.Spec.Selector
	case gvk.Group == "apps" && gvk.Kind == "DaemonSet":
		var ds appsv1.DaemonSet
		if !from(&ds) {
			return r, false
		}
		r.Template, r.Replicas, r.Selector = &ds.Spec.Template, 0, ds.Spec.Selector
	case gvk.Group == "batch" && gvk.Kind == "Job":
		var j batchv1.Job
		if !from(&j) {
			return r, false
		}
		r.Template, r.Replicas = &j.Spec.Template, replicas(j.Spec.Parallelism)
	case gvk.Group == "batch" && gvk.Kind == "CronJob":
		var cj batchv1.CronJob
		if !from(&cj) {
			return r, false
		}
		r.Template, r.Replicas = &cj.Spec.JobTemplate.Spec.Template, replicas(cj.Spec.JobTemplate.Spec.Parallelism)
	case gvk.Group == "" && gvk.Kind == "Pod":
		var p corev1.Pod
		if !from(&p) {
			return r, false
		}
		r.Template = &corev1.PodTemplateSpec{ObjectMeta: p.ObjectMeta, Spec: p.Spec}
	case gvk.Group == "" && gvk.Kind == "ReplicationController":
		var rc corev1.ReplicationController
		if !from(&rc) || rc.Spec.Template == nil {
			return r, false
		}
		r.Template, r.Replicas, r.Selector = rc.Spec.Template, replicas(rc.Spec.Replicas), &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	default:
		return r, false
	}
	return r, true
}

// replicas is a workload's replicas or parallelism, 1 when unset.
func replicas(n *int32) int64 {
	if n == nil {
		return 1
	}
	return int64(*n)
}
