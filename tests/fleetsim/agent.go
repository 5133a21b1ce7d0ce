package fleetsim

import (
	"context"
	"fmt"
	"strings"
	"time"

	helmstatus "helm.sh/helm/v4/pkg/release/common"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
)

// applied is what the agent deployed for one BundleDeployment.
type applied struct {
	id        string
	at        time.Time // zero when deployed before this simulator ran
	release   string
	resources []resourceKey
	// ref and revision are the Helm release and revision of the
	// deployment on the local cluster (revision 0 elsewhere); waiting
	// says Helm still waits for its rollout (helm.timeoutSeconds > 0): the
	// revision is pending until the wait ends.
	ref      releaseRef
	revision int
	waiting  bool
	// objects are what Helm rendered, for drift detection.
	objects []rendered
	// deploys counts the deployments of another cluster than the local
	// one: the revision of the release it reports.
	deploys int
}

// renderedResources are the objects deployment id (release r) renders, as
// every cluster reports them in status.resources; the chart is rendered
// once per deployment.
func (s *Sim) renderedResources(ctx context.Context, id string, r releaseSpec) ([]resourceKey, error) {
	s.mu.Lock()
	res, ok := s.rendered[id]
	s.mu.Unlock()
	if ok {
		return res, nil
	}
	ch, err := s.opts.Loader(ctx, r.chart, r.version)
	if err != nil {
		return nil, fmt.Errorf("fetching chart %s %s: %w", r.chart, r.version, err)
	}
	manifest, err := s.helm.render(ctx, ch, r)
	if err != nil {
		return nil, err
	}
	res = manifestResources(manifest, r.namespace)
	s.mu.Lock()
	s.rendered[id] = res
	s.mu.Unlock()
	return res, nil
}

// failure is a deployment the agent could not make: it is retried after a
// back-off that doubles with each attempt, as the agent's controller
// requeues a failed reconcile.
type failure struct {
	chart    string // the ManagedChart's key
	id       string // the deploymentID that failed
	msg      string
	attempts int
	next     time.Time
	// conflict: Helm's server-side apply met a field-manager conflict.
	// Fleet v0.16.1 reports nothing of it (FLEET-OBSERVED §10 of the
	// project's notes, docs/fleet.md): the BundleDeployment keeps its
	// status, the failed revision is the only trace.
	conflict bool
}

// syncAgent is the Fleet agent of one cluster for one BundleDeployment:
// deploy spec.deploymentID when it is new (Helm on the local cluster), then
// report the status the chart's fault calls for. Readiness that is due later
// and retries of a failed deployment are re-checked by a delayed requeue,
// not by polling.
func (s *Sim) syncAgent(ctx context.Context, k string) error {
	bd, exists := s.fresh.get(BundleDeploymentsGVR, s.bds, k)
	if !exists {
		return s.undeploy(ctx, k)
	}
	labels := bd.GetLabels()
	bundleNS, cluster := labels[LabelBundleNamespace], labels[LabelCluster]
	mcName, ok := managedChartOf(labels[LabelBundleName])
	if !ok {
		return nil
	}
	f := s.Fault(bundleNS, mcName)
	v := viewOf(bd)
	if f.Stale || f.AgentHold || v.DeploymentID == "" { // frozen, held, or paused before its first deployment
		return nil
	}
	failing := f.ErrApplied != "" && (f.ErrAppliedVersion == "" || f.ErrAppliedVersion == deploymentVersion(bd))
	a := s.appliedOf(k)
	now := time.Now()
	if failing && a.id == v.DeploymentID {
		// set on a deployment made before: it is reported failed at once
		return s.writeAgentStatus(ctx, bd, failedStatus(v, f.ErrApplied))
	}
	if a.id != v.DeploymentID {
		switch fl, retrying := s.failureOf(k); {
		case v.AppliedID == v.DeploymentID && !v.DeployFailed && !failing:
			a = applied{id: v.DeploymentID} // deployed by an earlier simulator
		case retrying && fl.id == v.DeploymentID && now.Before(fl.next):
			s.agentQueue.AddAfter(k, fl.next.Sub(now)) // backing off
			if fl.conflict {
				return nil
			}
			return s.writeAgentStatus(ctx, bd, failedStatus(v, fl.msg))
		default:
			var err error
			if a, err = s.deploy(ctx, k, bd, bundleNS, mcName, cluster == LocalCluster, failing); err != nil {
				msg := err.Error()
				if failing {
					msg = f.ErrApplied
				} else if isConflict(err) {
					s.deployConflicted(k, bd, v, msg)
					return nil
				}
				return s.deployFailed(ctx, k, bd, v, msg)
			}
			s.clearFailure(k)
			s.startDriftWatch(ctx, k, a)
		}
		s.setApplied(k, a)
	}
	// A deployment once reported ready stays ready unless NeverReady: Delay
	// and ReadyOverTime hold back new deployments only.
	wasReady := v.Ready && v.AppliedID == v.DeploymentID && !v.DeployFailed
	readyAt := a.at.Add(f.Delay + spread(f.ReadyOverTime, clusterIndex(cluster), s.opts.Clusters))
	ready := !f.NeverReady && (wasReady || !now.Before(readyAt))
	if wait := helmWait(bd); wait > 0 && !ready {
		// helm.timeoutSeconds > 0: Helm waits for the rollout inside the
		// agent, so the deployment is not reported applied until it is
		// ready (the BundleDeployment keeps its status: WaitApplied, the
		// release revision stays pending), and when Helm's wait runs out
		// Helm marks the revision failed and the deployment fails
		deadline := a.at.Add(wait)
		if !now.Before(deadline) {
			msg := helmWaitFailure(a)
			s.endHelmWait(k, a, helmstatus.StatusFailed, "Upgrade \""+a.ref.name+"\" failed: "+msg)
			s.setApplied(k, applied{}) // not applied: the retry runs Helm again
			return s.deployFailed(ctx, k, bd, v, msg)
		}
		next := deadline
		if !f.NeverReady && readyAt.Before(deadline) {
			next = readyAt
		}
		s.agentQueue.AddAfter(k, next.Sub(now))
		return nil
	}
	if a.waiting {
		s.endHelmWait(k, a, helmstatus.StatusDeployed, "Upgrade complete")
	}
	modified, err := s.driftOf(ctx, a, comparePatchesOf(bd))
	if err != nil {
		return err
	}
	var live []nonReadyStatus
	if s.opts.LiveReadiness && cluster == LocalCluster && ready {
		if live, err = s.liveNotReady(ctx, a); err != nil {
			return err
		}
		ready = len(live) == 0
	}
	st := appliedStatus(a, ready, modified)
	if len(live) > 0 {
		st.NonReadyStatus = live
		st.Conditions[2].Message = "not ready: " + objName(live[0].Namespace, live[0].Name)
	}
	if err := s.writeAgentStatus(ctx, bd, st); err != nil {
		return err
	}
	switch {
	case len(live) > 0:
		s.agentQueue.AddAfter(k, s.opts.LiveReadinessEvery) // Fleet's agent looks at the objects again
	case !ready && !f.NeverReady:
		s.agentQueue.AddAfter(k, readyAt.Sub(now))
	}
	return nil
}

// deployFailed reports a failed deployment and schedules its retry.
func (s *Sim) deployFailed(ctx context.Context, k string, bd *unstructured.Unstructured, v bdView, msg string) error {
	l := bd.GetLabels()
	mcName, _ := managedChartOf(l[LabelBundleName])
	fl := s.fail(k, key(l[LabelBundleNamespace], mcName), v.DeploymentID, msg)
	s.agentQueue.AddAfter(k, time.Until(fl.next))
	if err := s.writeAgentStatus(ctx, bd, failedStatus(v, msg)); err != nil {
		s.log.Info("writing a failed deployment", "bundleDeployment", k, "err", err)
		return err
	}
	return nil
}

// deployConflicted is a deployment Helm refused with a field-manager
// conflict: retried with back-off like any failure, but, as Fleet v0.16.1
// does, with the BundleDeployment's status left as it was (still applied
// and ready on the deployment before).
func (s *Sim) deployConflicted(k string, bd *unstructured.Unstructured, v bdView, msg string) {
	l := bd.GetLabels()
	mcName, _ := managedChartOf(l[LabelBundleName])
	fl := s.fail(k, key(l[LabelBundleNamespace], mcName), v.DeploymentID, msg)
	s.mu.Lock()
	fl.conflict = true
	s.failures[k] = fl
	s.mu.Unlock()
	s.log.Info("failed deploying bundle", "bundleDeployment", k, "err", msg)
	s.agentQueue.AddAfter(k, time.Until(fl.next))
}

// endHelmWait ends Helm's wait for the rollout of deployment a: its
// revision becomes status (deployed, or failed when the wait ran out).
func (s *Sim) endHelmWait(k string, a applied, status helmstatus.Status, description string) {
	if a.revision > 0 {
		if err := s.helm.setStatus(a.ref, a.revision, status, description); err != nil {
			s.log.Info("ending Helm's wait", "bundleDeployment", k, "err", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.applied[k]; cur.id == a.id && cur.revision == a.revision {
		cur.waiting = false
		s.applied[k] = cur
	}
}

// spread is when cluster i of n becomes ready within d.
func spread(d time.Duration, i, n int) time.Duration {
	if d <= 0 || n <= 0 || i < 0 {
		return 0
	}
	return d * time.Duration(i+1) / time.Duration(n)
}

// deploymentVersion is the chart version a BundleDeployment deploys.
func deploymentVersion(bd *unstructured.Unstructured) string {
	return releaseOf(bd).version
}

// helmWait is the BundleDeployment's helm.timeoutSeconds: > 0, Helm waits
// for the rollout that long.
func helmWait(bd *unstructured.Unstructured) time.Duration {
	return releaseOf(bd).timeout
}

// helmWaitFailure is the error of a Helm wait that ran out, in the words
// Fleet's agent reports it.
func helmWaitFailure(a applied) string {
	res := resourceKey{APIVersion: "v1", Kind: "Release", Name: a.release}
	if len(a.resources) > 0 {
		res = a.resources[0]
	}
	return fmt.Sprintf("resource %s/%s not ready. status: InProgress, message: simulated: not ready yet context deadline exceeded",
		res.Kind, objName(res.Namespace, res.Name))
}

// deploy applies the BundleDeployment's spec.options: a Helm install or
// upgrade on the local cluster, nothing elsewhere. reject makes it fail
// (Fault.ErrApplied): on the local cluster Helm really runs and fails,
// leaving a failed revision.
func (s *Sim) deploy(ctx context.Context, k string, bd *unstructured.Unstructured, bundleNS, mcName string, local, reject bool) (applied, error) {
	id, _, _ := unstructured.NestedString(bd.Object, "spec", "deploymentID")
	r := releaseOf(bd)
	if !local {
		if reject {
			return applied{}, fmt.Errorf("deployment %s failed", id)
		}
		// Another cluster's agent deploys the same objects and reports
		// them: rendered once per deployment, as the local cluster's Helm
		// renders them.
		resources, err := s.renderedResources(ctx, id, r)
		if err != nil {
			return applied{}, err
		}
		deploys := s.appliedOf(k).deploys + 1
		return applied{id: id, at: time.Now(), release: fmt.Sprintf("%s/%s:%d", r.namespace, r.name, deploys),
			resources: resources, deploys: deploys}, nil
	}
	ch, err := s.opts.Loader(ctx, r.chart, r.version)
	if err != nil {
		return applied{}, fmt.Errorf("fetching chart %s %s: %w", r.chart, r.version, err)
	}
	s.setRelease(k, releaseRef{name: r.name, namespace: r.namespace})
	rel, err := s.helm.apply(ctx, ch, r, reject)
	if err != nil {
		return applied{}, err
	}
	s.recordHelmRun(bundleNS, mcName)
	a := applied{
		id:        id,
		at:        time.Now(),
		release:   fmt.Sprintf("%s/%s:%d", rel.Namespace, rel.Name, rel.Version),
		resources: manifestResources(rel.Manifest, rel.Namespace),
		ref:       releaseRef{name: rel.Name, namespace: rel.Namespace},
		revision:  rel.Version,
		objects:   renderedObjects(rel.Manifest, rel.Namespace),
	}
	if r.timeout > 0 {
		// Helm now waits for the rollout (the simulator judges it, see
		// syncAgent); meanwhile the revision is pending, as Helm leaves it
		pending := helmstatus.StatusPendingUpgrade
		if rel.Version == 1 {
			pending = helmstatus.StatusPendingInstall
		}
		if err := s.helm.setStatus(a.ref, a.revision, pending, "Helm waits for the rollout"); err != nil {
			return applied{}, err
		}
		a.waiting = true
	}
	return a, nil
}

// undeploy uninstalls the release of a deleted BundleDeployment.
func (s *Sim) undeploy(ctx context.Context, k string) error {
	s.mu.Lock()
	ref, ok := s.releases[k]
	delete(s.applied, k)
	delete(s.failures, k)
	if stop := s.driftStops[k]; stop != nil {
		stop()
		delete(s.driftStops, k)
	}
	s.mu.Unlock()
	if !ok {
		return nil
	}
	if err := s.helm.uninstall(ctx, ref); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.releases, k)
	s.mu.Unlock()
	return nil
}

func appliedStatus(a applied, ready bool, modified []Resource) bdStatus {
	st := bdStatus{
		AppliedDeploymentID: a.id, Release: a.release, Ready: ready,
		NonModified: len(modified) == 0, Resources: a.resources,
		Display:        bdDisplay{Deployed: "Yes", Monitored: "Yes", State: StateReady},
		ResourceCounts: resourceCounts{DesiredReady: len(a.resources), Ready: len(a.resources), Modified: len(modified)},
	}
	if !ready && len(a.resources) > 0 {
		st.ResourceCounts.Ready, st.ResourceCounts.NotReady = len(a.resources)-1, 1
	}
	for _, m := range modified {
		st.ModifiedStatus = append(st.ModifiedStatus, modifiedStatus{
			APIVersion: m.APIVersion, Kind: m.Kind, Namespace: m.Namespace, Name: m.Name, Patch: m.Patch, Missing: m.Missing,
		})
	}
	readyCond := condition{Type: "Ready", Status: "True"}
	switch {
	case !ready:
		res := resourceKey{APIVersion: "v1", Kind: "Release", Name: a.release}
		if len(a.resources) > 0 {
			res = a.resources[0]
		}
		st.NonReadyStatus = []nonReadyStatus{{
			APIVersion: res.APIVersion, Kind: res.Kind, Namespace: res.Namespace, Name: res.Name,
			Summary: resourceSummary{State: "in-progress", Transitioning: true, Message: []string{"simulated: not ready yet"}},
		}}
		st.Display.State = StateNotReady
		readyCond = condition{Type: "Ready", Status: "False", Message: "not ready: " + objName(res.Namespace, res.Name)}
	case len(modified) > 0:
		st.Display.State = StateModified
		readyCond = condition{Type: "Ready", Status: "False", Message: "modified: " + objName(modified[0].Namespace, modified[0].Name)}
	}
	st.Conditions = []condition{
		{Type: "Installed", Status: "True"},
		{Type: "Deployed", Status: "True"},
		readyCond,
		{Type: "Monitored", Status: "True"},
	}
	return st
}

// failedStatus is the status of a deployment the agent could not make, as
// real Fleet writes it: appliedDeploymentID stays the one before, the
// Deployed condition is False with the error, and ready and the Ready
// condition stay what the deployment before left (true, for a chart that
// was ready): only the deployment IDs and Deployed tell the failure.
func failedStatus(v bdView, msg string) bdStatus {
	readyCond := condition{Type: "Ready", Status: "False", Message: msg}
	if v.Ready {
		readyCond = condition{Type: "Ready", Status: "True"}
	}
	return bdStatus{
		AppliedDeploymentID: v.AppliedID, Ready: v.Ready, NonModified: true,
		Display: bdDisplay{Deployed: "Error: " + msg, Monitored: "Yes", State: StateErrApplied},
		Conditions: []condition{
			{Type: "Installed", Status: "True"},
			{Type: "Deployed", Status: "False", Reason: "Error", Message: msg},
			readyCond,
			{Type: "Monitored", Status: "True"},
		},
	}
}

// writeAgentStatus writes st as the BundleDeployment's status, if it
// changed. Its display lags the rest by one write, as Fleet's agent
// writes it: a change goes out with the display of before, and the display
// follows in a write of its own (the BundleDeployment is requeued for it).
func (s *Sim) writeAgentStatus(ctx context.Context, bd *unstructured.Unstructured, st bdStatus) error {
	oldConds, _, _ := unstructured.NestedSlice(bd.Object, "status", "conditions")
	st.Conditions = mergeConditions(oldConds, st.Conditions, time.Now())
	display := st.Display
	st.Display = displayOf(bd)
	status, err := toMap(&st)
	if err != nil {
		return err
	}
	old, _, _ := unstructured.NestedMap(bd.Object, "status")
	if equality.Semantic.DeepEqual(old, status) {
		if st.Display == display {
			return nil
		}
		st.Display = display // only the display is behind: it follows now
		if status, err = toMap(&st); err != nil {
			return err
		}
	} else if st.Display != display {
		defer s.agentQueue.Add(key(bd.GetNamespace(), bd.GetName()))
	}
	nb := bd.DeepCopy()
	nb.Object["status"] = status
	got, err := s.client.Resource(BundleDeploymentsGVR).Namespace(bd.GetNamespace()).UpdateStatus(ctx, nb, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("writing the status of BundleDeployment %s/%s: %w", bd.GetNamespace(), bd.GetName(), err)
	}
	s.fresh.wrote(BundleDeploymentsGVR, got)
	// Do not wait for the watch: it may be re-connecting with a back-off.
	l := bd.GetLabels()
	s.bundleQueue.Add(key(l[LabelBundleNamespace], l[LabelBundleName]))
	return nil
}

// displayOf is the display a BundleDeployment's status has now.
func displayOf(bd *unstructured.Unstructured) bdDisplay {
	var d bdDisplay
	d.Deployed, _, _ = unstructured.NestedString(bd.Object, "status", "display", "deployed")
	d.Monitored, _, _ = unstructured.NestedString(bd.Object, "status", "display", "monitored")
	d.State, _, _ = unstructured.NestedString(bd.Object, "status", "display", "state")
	return d
}

func (s *Sim) appliedOf(k string) applied {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied[k]
}

func (s *Sim) setApplied(k string, a applied) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.applied[k] = a
}

// failureOf returns the failed deployment of BundleDeployment k, if any.
func (s *Sim) failureOf(k string) (failure, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fl, ok := s.failures[k]
	return fl, ok
}

// fail notes a failed attempt of deployment id of BundleDeployment k and
// when the next one is due: Options.RetryBackoff after the first, doubling
// up to maxRetryBackoff.
func (s *Sim) fail(k, chart, id, msg string) failure {
	s.mu.Lock()
	defer s.mu.Unlock()
	fl := s.failures[k]
	if fl.id != id {
		fl = failure{chart: chart, id: id}
	}
	fl.msg = msg
	fl.attempts++
	backoff := s.opts.RetryBackoff << min(fl.attempts-1, 16)
	fl.next = time.Now().Add(min(backoff, maxRetryBackoff))
	s.failures[k] = fl
	return fl
}

func (s *Sim) clearFailure(k string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.failures, k)
}

func (s *Sim) setRelease(k string, r releaseRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases[k] = r
}

// releaseSpec is one Helm release as a BundleDeployment's options ask it.
type releaseSpec struct {
	chart, version  string
	name, namespace string
	values          map[string]any
	timeout         time.Duration
	maxHistory      int
	force           bool
	takeOwnership   bool
}

// releaseRef names an installed release.
type releaseRef struct{ name, namespace string }

// releaseOf reads the options Fleet hands the agent in bd's spec. The
// release name defaults to the name of the BundleDeployment in real Fleet,
// which is its Bundle's, mcc-<name> (Fleet makes it a valid release name,
// names.HelmReleaseName; the simulator's names are valid already; the
// simulator's own BundleDeployment names add the cluster), the namespace
// to "default", the history to Fleet's 2 revisions (MaxHelmHistory).
func releaseOf(bd *unstructured.Unstructured) releaseSpec {
	opts, _, _ := unstructured.NestedMap(bd.Object, "spec", "options")
	helm, _ := opts["helm"].(map[string]any)
	r := releaseSpec{namespace: "default", maxHistory: 2}
	r.chart, _ = helm["chart"].(string)
	r.version, _ = helm["version"].(string)
	r.name, _ = helm["releaseName"].(string)
	if r.name == "" {
		r.name = bd.GetLabels()[LabelBundleName]
	}
	if ns, _ := opts["defaultNamespace"].(string); ns != "" {
		r.namespace = ns
	}
	r.values, _ = helm["values"].(map[string]any)
	if r.values == nil {
		r.values = map[string]any{}
	}
	if t, ok := helm["timeoutSeconds"].(int64); ok && t > 0 {
		r.timeout = time.Duration(t) * time.Second
	}
	if h, ok := helm["maxHistory"].(int64); ok && h > 0 {
		r.maxHistory = int(h)
	}
	r.force, _ = helm["force"].(bool)
	r.takeOwnership, _ = helm["takeOwnership"].(bool)
	return r
}

// manifestResources lists the objects of a rendered release manifest.
func manifestResources(manifest, namespace string) []resourceKey {
	var out []resourceKey
	for _, doc := range strings.Split(manifest, "\n---") {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Metadata   struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yamlUnmarshal([]byte(doc), &head); err != nil || head.Kind == "" {
			continue
		}
		ns := head.Metadata.Namespace
		if ns == "" {
			ns = namespace
		}
		out = append(out, resourceKey{APIVersion: head.APIVersion, Kind: head.Kind, Namespace: ns, Name: head.Metadata.Name})
	}
	return out
}

// liveNotReady judges the live objects of deployment a's Helm release by
// kstatus (LiveReadiness): the ones not ready, as Fleet's nonReadyStatus.
func (s *Sim) liveNotReady(ctx context.Context, a applied) ([]nonReadyStatus, error) {
	if a.ref.name == "" {
		return nil, nil
	}
	rel, err := s.live.Newest(a.ref.namespace, a.ref.name, cluster.SecretDriver)
	if err != nil || rel == nil {
		return nil, err
	}
	res, err := s.live.Look(ctx, rel)
	if err != nil {
		return nil, err
	}
	var out []nonReadyStatus
	for _, o := range res.Objects {
		out = append(out, nonReadyStatus{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name,
			Summary: resourceSummary{State: strings.ToLower(o.Status), Transitioning: o.Status == "InProgress", Error: o.Status == "Failed",
				Message: []string{o.Message}}})
	}
	return out, nil
}
