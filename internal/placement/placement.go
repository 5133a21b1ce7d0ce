// Package placement places a pod on nodes as kube-scheduler's default
// profile filters do: NodeUnschedulable, TaintToleration, NodeAffinity
// and NodeResourcesFit, the scheduler's own plugins run on NodeInfos the
// caller fills from the nodes and the pods bound to them. The apply
// check places the pods an upgrade makes; the drain prediction places the
// replacements of the pods a drain evicts.
package placement

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeaffinity"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/noderesources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/nodeunschedulable"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/tainttoleration"
)

// BoundPods is the field selector of the pods whose requests use their
// nodes' resources: bound to a node, not ended (the scheduler's NodeInfo
// counts them).
const BoundPods = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"

// Filter is one of the scheduler's filter plugins.
type Filter interface {
	fwk.PreFilterPlugin
	fwk.FilterPlugin
}

var (
	filtersOnce sync.Once
	filters     []Filter
	filtersErr  error
)

// Filters are the default profile's filters that a pod
// template and the nodes decide, built once with their default
// arguments and no framework handle (nothing to share).
func Filters(ctx context.Context) ([]Filter, error) {
	filtersOnce.Do(func() {
		fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
		// without a handle there is no DRA manager, which is what this
		// feature asks for; with none, the plugin decides as it would
		fts.EnableDRAExtendedResource = false
		fitArgs := &config.NodeResourcesFitArgs{ScoringStrategy: &config.ScoringStrategy{Type: config.LeastAllocated,
			Resources: []config.ResourceSpec{{Name: "cpu", Weight: 1}, {Name: "memory", Weight: 1}}}}
		for _, mk := range []func() (fwk.Plugin, error){
			func() (fwk.Plugin, error) { return nodeunschedulable.New(ctx, nil, nil, fts) },
			func() (fwk.Plugin, error) { return tainttoleration.New(ctx, nil, nil, fts) },
			func() (fwk.Plugin, error) { return nodeaffinity.New(ctx, &config.NodeAffinityArgs{}, nil, fts) },
			func() (fwk.Plugin, error) { return noderesources.NewFit(ctx, fitArgs, nil, fts) },
		} {
			p, err := mk()
			if err != nil {
				filtersErr = err
				return
			}
			filters = append(filters, p.(Filter))
		}
	})
	return filters, filtersErr
}

// Schedule runs the filters for pod on every node, as the scheduler's
// findNodesThatFitPod does, and returns the feasible node with the most
// free CPU; or a FitError whose message is the scheduler's.
func Schedule(ctx context.Context, plugins []Filter, pod *corev1.Pod, nodes []*framework.NodeInfo) (*framework.NodeInfo, error) {
	all := make([]fwk.NodeInfo, len(nodes))
	for i, n := range nodes {
		all[i] = n
	}
	state := framework.NewCycleState()
	fitErr := &framework.FitError{Pod: pod, NumAllNodes: len(nodes), Diagnosis: framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}}
	skip := sets.New[string]()
	var pre *fwk.PreFilterResult
	for _, p := range plugins {
		r, st := p.PreFilter(ctx, state, pod, all)
		if st.IsSkip() {
			skip.Insert(p.Name())
			continue
		}
		if !st.IsSuccess() {
			if !st.IsRejected() {
				return nil, st.AsError()
			}
			st.SetPlugin(p.Name())
			fitErr.Diagnosis.NodeToStatus.SetAbsentNodesStatus(st)
			fitErr.Diagnosis.PreFilterMsg = st.Message()
			fitErr.Diagnosis.AddPluginStatus(st)
			return nil, fitErr
		}
		pre = pre.Merge(r)
	}
	state.SetSkipFilterPlugins(skip)
	if !pre.AllNodes() {
		fitErr.Diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable, "node(s) didn't satisfy plugin(s) [NodeAffinity]"))
	}
	var best *framework.NodeInfo
	var bestFree int64
	for _, ni := range nodes {
		if !pre.AllNodes() && !pre.NodeNames.Has(ni.Node().Name) {
			continue
		}
		var rejected *fwk.Status
		for _, p := range plugins {
			if skip.Has(p.Name()) {
				continue
			}
			if st := p.Filter(ctx, state, pod, ni); !st.IsSuccess() {
				if !st.IsRejected() {
					return nil, st.AsError()
				}
				st.SetPlugin(p.Name())
				rejected = st
				break
			}
		}
		if rejected != nil {
			fitErr.Diagnosis.NodeToStatus.Set(ni.Node().Name, rejected)
			fitErr.Diagnosis.AddPluginStatus(rejected)
			continue
		}
		free := ni.GetAllocatable().GetMilliCPU() - ni.GetRequested().GetMilliCPU()
		if best == nil || free > bestFree {
			best, bestFree = ni, free
		}
	}
	if best == nil {
		return nil, fitErr
	}
	return best, nil
}
