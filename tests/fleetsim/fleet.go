package fleetsim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// writeParallelism bounds concurrent BundleDeployment writes of one Bundle.
const writeParallelism = 32

// syncBundle is the Fleet controller: it makes one BundleDeployment per
// cluster follow the Bundle, then summarises them into the Bundle status and
// (as Rancher) into the ManagedChart status.
func (s *Sim) syncBundle(ctx context.Context, k string) error {
	ns, name, _ := strings.Cut(k, "/")
	b, exists := s.fresh.get(BundlesGVR, s.bundles, k)
	if !exists {
		return s.deleteBundleDeployments(ctx, k)
	}
	mcName, ok := managedChartOf(name)
	if !ok || b.GetAnnotations()[annOwnerName] != mcName {
		return nil // not a ManagedChart's Bundle
	}
	c, err := contentOf(b)
	if err != nil {
		return err
	}
	views, err := s.syncBundleDeployments(ctx, ns, name, c)
	if err != nil {
		return err
	}
	if s.Fault(ns, mcName).Stale {
		return nil
	}
	if held, err := s.statusRace(ctx, b, mcName); held || err != nil {
		return err
	}
	if s.Fault(ns, mcName).NoClusters {
		views = nil
	}
	return s.writeBundleStatus(ctx, b, mcName, views, c.stagedID)
}

// statusRace plays Fault.StatusRace: on the first sync of a new
// generation it writes the stale merge patch (observedGeneration only),
// then holds every status write until the race is over. It reports
// whether the status write is held.
func (s *Sim) statusRace(ctx context.Context, b *unstructured.Unstructured, mcName string) (bool, error) {
	d := s.Fault(b.GetNamespace(), mcName).StatusRace
	k := key(b.GetNamespace(), b.GetName())
	observed, _, _ := unstructured.NestedInt64(b.Object, "status", "observedGeneration")
	s.mu.Lock()
	until, racing := s.races[k]
	switch {
	case racing && time.Now().Before(until):
		s.mu.Unlock()
		return true, nil
	case racing:
		delete(s.races, k) // the controller catches up
		s.mu.Unlock()
		return false, nil
	case d <= 0 || observed == 0 || observed == b.GetGeneration():
		s.mu.Unlock()
		return false, nil
	}
	s.races[k] = time.Now().Add(d)
	s.mu.Unlock()
	patch := fmt.Appendf(nil, `{"status":{"observedGeneration":%d}}`, b.GetGeneration())
	got, err := s.client.Resource(BundlesGVR).Namespace(b.GetNamespace()).Patch(ctx, b.GetName(), types.MergePatchType, patch,
		metav1.PatchOptions{}, "status")
	if err != nil {
		return false, fmt.Errorf("writing the stale status of Bundle %s: %w", k, err)
	}
	s.fresh.wrote(BundlesGVR, got)
	s.log.Debug("wrote a stale Bundle status (status race)", "bundle", k, "generation", b.GetGeneration(), "for", d)
	time.AfterFunc(d, func() { s.touchChart(b.GetNamespace(), mcName) })
	return true, nil
}

// content is what a Bundle asks the BundleDeployments to deploy.
type content struct {
	stagedID string
	options  map[string]any // BundleDeployment spec.options
	paused   bool
}

func contentOf(b *unstructured.Unstructured) (content, error) {
	spec, _, _ := unstructured.NestedMap(b.Object, "spec")
	helm, _ := spec["helm"].(map[string]any)
	options := map[string]any{"helm": helm}
	for _, f := range []string{"defaultNamespace", "namespace", "serviceAccount", "diff"} {
		if v, ok := spec[f]; ok && v != nil {
			options[f] = v
		}
	}
	others := map[string]any{}
	for k, v := range options {
		if k != "diff" { // as Fleet's: drift settings do not change what is deployed
			others[k] = v
		}
	}
	helmNoValues := map[string]any{}
	for k, v := range helm {
		if k != "values" {
			helmNoValues[k] = v
		}
	}
	others["helm"] = helmNoValues
	chart, _ := helm["chart"].(string)
	version, _ := helm["version"].(string)
	id, err := deploymentID(chart, version, helm["values"], others)
	if err != nil {
		return content{}, fmt.Errorf("computing the deployment ID of Bundle %s/%s: %w", b.GetNamespace(), b.GetName(), err)
	}
	paused, _ := spec["paused"].(bool)
	return content{stagedID: id, options: options, paused: paused}, nil
}

// syncBundleDeployments creates, updates and deletes the BundleDeployments
// of a Bundle and returns what they say, as written.
func (s *Sim) syncBundleDeployments(ctx context.Context, ns, bundle string, c content) ([]bdView, error) {
	cns := ClusterNamespace(ns)
	if err := s.ensureNamespace(ctx, cns); err != nil {
		return nil, err
	}
	objs, err := s.bds.GetIndexer().ByIndex(bundleIndex, key(ns, bundle))
	if err != nil {
		return nil, fmt.Errorf("listing the BundleDeployments of %s/%s: %w", ns, bundle, err)
	}
	current := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		current[u.GetName()] = u
	}
	var (
		mu    sync.Mutex
		views []bdView
		errs  []error
		wg    sync.WaitGroup
		sem   = make(chan struct{}, writeParallelism)
	)
	write := func(f func() (*unstructured.Unstructured, error)) {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			u, err := f()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if u != nil {
				views = append(views, viewOf(u))
			}
		})
	}
	client := s.client.Resource(BundleDeploymentsGVR).Namespace(cns)
	for i := range s.opts.Clusters {
		cluster := ClusterName(i)
		name := BundleDeploymentName(bundle, cluster)
		cur, _ := s.fresh.pick(BundleDeploymentsGVR, key(cns, name), current[name])
		delete(current, name)
		if cur != nil && upToDate(cur, c) {
			views = append(views, viewOf(cur))
			continue
		}
		bd := desiredBundleDeployment(cur, ns, bundle, cns, cluster, c)
		write(func() (*unstructured.Unstructured, error) {
			if cur == nil {
				u, err := client.Create(ctx, bd, metav1.CreateOptions{})
				if err != nil {
					return nil, fmt.Errorf("creating BundleDeployment %s/%s: %w", cns, bd.GetName(), err)
				}
				s.fresh.wrote(BundleDeploymentsGVR, u)
				s.agentQueue.Add(key(cns, u.GetName()))
				return u, nil
			}
			u, err := client.Update(ctx, bd, metav1.UpdateOptions{})
			if err != nil {
				return nil, fmt.Errorf("updating BundleDeployment %s/%s: %w", cns, bd.GetName(), err)
			}
			s.fresh.wrote(BundleDeploymentsGVR, u)
			s.agentQueue.Add(key(cns, u.GetName()))
			return u, nil
		})
	}
	for _, extra := range current { // clusters beyond Options.Clusters
		write(func() (*unstructured.Unstructured, error) {
			s.fresh.forget(BundleDeploymentsGVR, key(cns, extra.GetName()))
			err := client.Delete(ctx, extra.GetName(), metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("deleting BundleDeployment %s/%s: %w", cns, extra.GetName(), err)
			}
			return nil, nil
		})
	}
	wg.Wait()
	return views, errors.Join(errs...)
}

// upToDate says whether a BundleDeployment already carries content c,
// options included: a change of options that stay out of the
// deploymentID (diff) is still written, as Fleet writes it.
func upToDate(bd *unstructured.Unstructured, c content) bool {
	staged, _, _ := unstructured.NestedString(bd.Object, "spec", "stagedDeploymentID")
	id, _, _ := unstructured.NestedString(bd.Object, "spec", "deploymentID")
	paused, _, _ := unstructured.NestedBool(bd.Object, "spec", "paused")
	stagedOpts, _, _ := unstructured.NestedMap(bd.Object, "spec", "stagedOptions")
	opts, _, _ := unstructured.NestedMap(bd.Object, "spec", "options")
	return staged == c.stagedID && paused == c.paused && equality.Semantic.DeepEqual(stagedOpts, c.options) &&
		(c.paused || id == c.stagedID && equality.Semantic.DeepEqual(opts, c.options))
}

// desiredBundleDeployment is cur (nil: a new one) with content c staged,
// and deployed unless the Bundle is paused.
func desiredBundleDeployment(cur *unstructured.Unstructured, ns, bundle, cns, cluster string, c content) *unstructured.Unstructured {
	var bd *unstructured.Unstructured
	if cur != nil {
		bd = cur.DeepCopy()
	} else {
		bd = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": BundleDeploymentsGVR.GroupVersion().String(),
			"kind":       "BundleDeployment",
			"metadata": map[string]any{
				"name": BundleDeploymentName(bundle, cluster), "namespace": cns,
				"labels": map[string]any{
					LabelBundleName: bundle, LabelBundleNamespace: ns,
					LabelCluster: cluster, LabelClusterNamespace: ns, LabelManaged: "true",
				},
			},
		}}
	}
	spec, _ := bd.Object["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	spec["stagedDeploymentID"] = c.stagedID
	spec["stagedOptions"] = c.options
	spec["paused"] = c.paused
	if !c.paused {
		spec["deploymentID"] = c.stagedID
		spec["options"] = c.options
	}
	bd.Object["spec"] = spec
	return bd
}

func (s *Sim) deleteBundleDeployments(ctx context.Context, bundleKey string) error {
	objs, err := s.bds.GetIndexer().ByIndex(bundleIndex, bundleKey)
	if err != nil {
		return fmt.Errorf("listing the BundleDeployments of deleted Bundle %s: %w", bundleKey, err)
	}
	var errs []error
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		s.fresh.forget(BundleDeploymentsGVR, key(u.GetNamespace(), u.GetName()))
		err := s.client.Resource(BundleDeploymentsGVR).Namespace(u.GetNamespace()).Delete(ctx, u.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting BundleDeployment %s/%s: %w", u.GetNamespace(), u.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

func (s *Sim) ensureNamespace(ctx context.Context, ns string) error {
	s.mu.Lock()
	ok := s.nsExists[ns]
	s.mu.Unlock()
	if ok {
		return nil
	}
	_, err := s.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating cluster namespace %s: %w", ns, err)
	}
	s.mu.Lock()
	s.nsExists[ns] = true
	s.mu.Unlock()
	return nil
}

// writeBundleStatus writes the Bundle status computed from views, when it
// changed, then the ManagedChart's copy.
func (s *Sim) writeBundleStatus(ctx context.Context, b *unstructured.Unstructured, mcName string, views []bdView, stagedID string) error {
	ns := b.GetNamespace()
	desired := s.opts.Clusters
	if s.Fault(ns, mcName).NoClusters {
		desired = 0
	}
	st := computeBundleStatus(b.GetGeneration(), desired, views, stagedID, ns)
	st.ResourcesSHA256Sum = strings.TrimPrefix(strings.SplitN(stagedID, ":", 2)[0], "s-")
	oldConds, _, _ := unstructured.NestedSlice(b.Object, "status", "conditions")
	st.Conditions = mergeConditions(oldConds, st.Conditions, time.Now())
	status, err := toMap(&st)
	if err != nil {
		return err
	}
	ready := st.Summary.Ready == s.opts.Clusters && st.Unavailable == 0
	old, _, _ := unstructured.NestedMap(b.Object, "status")
	if !equality.Semantic.DeepEqual(old, status) {
		nb := b.DeepCopy()
		nb.Object["status"] = status
		// Recorded before sending: a watcher may see the write before the
		// response arrives here.
		undo := s.recordReady(ns, mcName, ready, false)
		got, err := s.client.Resource(BundlesGVR).Namespace(ns).UpdateStatus(ctx, nb, metav1.UpdateOptions{})
		if err != nil {
			undo()
			return fmt.Errorf("writing the status of Bundle %s/%s: %w", ns, b.GetName(), err)
		}
		s.fresh.wrote(BundlesGVR, got)
		s.log.Debug("wrote Bundle status", "bundle", ns+"/"+b.GetName(), "generation", b.GetGeneration(),
			"ready", st.Display.ReadyClusters, "state", st.Display.State)
	}
	return s.writeManagedChartStatus(ctx, ns, mcName, status, ready)
}
