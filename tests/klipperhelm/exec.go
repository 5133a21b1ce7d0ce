package klipperhelm

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"
	"helm.sh/helm/v4/pkg/kube"
	helmstatus "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	chartpkg "github.com/chart-upgrader/chart-upgrader/internal/chart"
	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
)

// LabelChart is on the pods of helm-controller's Jobs: the HelmChart.
const LabelChart = "helmcharts.helm.cattle.io/chart"

// KeyConfigHash is the release label klipper-helm writes (--labels).
const KeyConfigHash = "helmcharts.helm.cattle.io/configHash"

// Options configures an Executor.
type Options struct {
	// Log receives what each run did, Helm's errors included.
	Log *slog.Logger
	// RestartBackoff is the first wait before a failed container is run
	// again; it doubles up to 30 times that (a kubelet: 10 s, up to
	// 5 min). Default 1 s.
	RestartBackoff time.Duration
}

// Executor runs the pods of helm-controller's Jobs.
type Executor struct {
	kube   kubernetes.Interface
	getter *cluster.HelmGetter
	opts   Options
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running map[types.UID]bool // pods being run
	runs    map[string]int     // Helm install/upgrade runs by namespace/HelmChart
}

// Start starts an Executor on the API server of cfg; Stop ends it.
func Start(ctx context.Context, cfg *rest.Config, opts Options) (*Executor, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.RestartBackoff <= 0 {
		opts.RestartBackoff = time.Second
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	e := &Executor{kube: kube, getter: cluster.NewHelmGetter(cfg), opts: opts, stop: cancel,
		running: map[types.UID]bool{}, runs: map[string]int{}}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = LabelChart
	}))
	pods := factory.Core().V1().Pods().Informer()
	handle := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			e.consider(ctx, p)
		}
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) }}); err != nil {
		cancel()
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watching the pods of helm-controller's Jobs: %w", ctx.Err())
	}
	return e, nil
}

// Stop ends the Executor and waits for the runs in progress.
func (e *Executor) Stop() {
	e.stop()
	e.wg.Wait()
}

// Runs is how many times Helm installed or upgraded the release of
// HelmChart namespace/name (successful or not).
func (e *Executor) Runs(namespace, name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.runs[namespace+"/"+name]
}

// consider runs a pod that is Running, not being deleted, not finished,
// and not run already.
func (e *Executor) consider(ctx context.Context, p *corev1.Pod) {
	if p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 {
		return
	}
	e.mu.Lock()
	if e.running[p.UID] {
		e.mu.Unlock()
		return
	}
	e.running[p.UID] = true
	e.mu.Unlock()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.runPod(ctx, p.DeepCopy())
	}()
}

// runPod runs the container until it succeeds, restarting it after a
// failure as a kubelet does under restartPolicy OnFailure, until the pod
// is gone (the Job controller deletes it once the Job failed).
func (e *Executor) runPod(ctx context.Context, p *corev1.Pod) {
	backoff := e.opts.RestartBackoff
	for attempt := 0; ; attempt++ {
		started := metav1.Now()
		termLog, err := e.run(ctx, p)
		if ctx.Err() != nil {
			return
		}
		exit := int32(0)
		if err != nil {
			exit = 1
			e.opts.Log.Info("helm job failed", "pod", p.Namespace+"/"+p.Name, "error", err.Error())
		}
		if werr := e.writeStatus(ctx, p, started, exit, strings.Join(termLog, "\n")); werr != nil {
			if !apierrors.IsNotFound(werr) {
				e.opts.Log.Warn("writing the pod status", "pod", p.Namespace+"/"+p.Name, "error", werr.Error())
			}
			return
		}
		if exit == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > 30*e.opts.RestartBackoff {
			backoff = 30 * e.opts.RestartBackoff
		}
		cur, err := e.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil || cur.UID != p.UID || cur.DeletionTimestamp != nil || cur.Status.Phase != corev1.PodRunning {
			return
		}
		p = cur
	}
}

// writeStatus records how the container ended: Succeeded, or a restart
// after a failure (the last state holds the failure).
func (e *Executor) writeStatus(ctx context.Context, p *corev1.Pod, started metav1.Time, exit int32, message string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := e.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cur.UID != p.UID {
			return apierrors.NewNotFound(corev1.Resource("pods"), p.Name)
		}
		now := metav1.Now()
		c := cur.Spec.Containers[0]
		term := &corev1.ContainerStateTerminated{ExitCode: exit, Reason: "Completed", Message: message,
			StartedAt: started, FinishedAt: now}
		var restarts int32
		for _, cs := range cur.Status.ContainerStatuses {
			if cs.Name == c.Name {
				restarts = cs.RestartCount
			}
		}
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image, RestartCount: restarts}
		if exit == 0 {
			cs.State = corev1.ContainerState{Terminated: term}
			cur.Status.Phase = corev1.PodSucceeded
			setCondition(cur, corev1.PodReady, corev1.ConditionFalse, "PodCompleted")
			setCondition(cur, corev1.ContainersReady, corev1.ConditionFalse, "PodCompleted")
		} else {
			term.Reason = "Error"
			cs.LastTerminationState = corev1.ContainerState{Terminated: term}
			cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff",
				Message: fmt.Sprintf("back-off restarting failed container %s in pod %s", c.Name, cur.Name)}}
			cs.RestartCount = restarts + 1
			setCondition(cur, corev1.PodReady, corev1.ConditionFalse, "ContainersNotReady")
			setCondition(cur, corev1.ContainersReady, corev1.ConditionFalse, "ContainersNotReady")
		}
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		_, err = e.kube.CoreV1().Pods(cur.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	})
}

func setCondition(p *corev1.Pod, t corev1.PodConditionType, s corev1.ConditionStatus, reason string) {
	now := metav1.Now()
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			if p.Status.Conditions[i].Status != s {
				p.Status.Conditions[i].LastTransitionTime = now
			}
			p.Status.Conditions[i].Status, p.Status.Conditions[i].Reason = s, reason
			return
		}
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: s, Reason: reason, LastTransitionTime: now})
}

// job is what one run reads from the pod.
type job struct {
	action          string // install or delete
	name, namespace string // the release (NAME, TARGET_NAMESPACE)
	chartNamespace  string // the HelmChart's
	helmChart       string
	version, repo   string
	chartRef        string
	driver          string
	failurePolicy   string
	timeout         time.Duration
	configHash      string
	serverSide      string // SERVER_SIDE: auto (default), true or false
	forceConflicts  bool   // FORCE_CONFLICTS
	expected        string // EXPECTED_RELEASE_REVISION
	sets, setStrs   []string
	valueFiles      []valueFile
	content         string // the ConfigMap holding NAME.tgz.base64
}

type valueFile struct{ path, secret, key string }

// readJob reads the run's inputs from the pod.
func readJob(p *corev1.Pod) (job, error) {
	c := p.Spec.Containers[0]
	env := map[string]string{}
	for _, v := range c.Env {
		env[v.Name] = v.Value
	}
	j := job{name: env["NAME"], namespace: env["TARGET_NAMESPACE"], chartNamespace: p.Namespace,
		helmChart: p.Labels[LabelChart], version: env["VERSION"], repo: env["REPO"], chartRef: env["CHART"],
		driver: env["HELM_DRIVER"], failurePolicy: env["FAILURE_POLICY"], configHash: env["CONFIG_HASH"],
		expected: env["EXPECTED_RELEASE_REVISION"], serverSide: env["SERVER_SIDE"], forceConflicts: env["FORCE_CONFLICTS"] == "true"}
	if j.serverSide == "" {
		j.serverSide = "auto"
	}
	if j.namespace == "" {
		j.namespace = p.Namespace
	}
	if j.driver == "" {
		j.driver = cluster.SecretDriver
	}
	if t := env["TIMEOUT"]; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil {
			return job{}, fmt.Errorf("TIMEOUT %q: %w", t, err)
		}
		j.timeout = d
	}
	if len(c.Args) == 0 {
		return job{}, errors.New("the container has no arguments")
	}
	j.action = c.Args[0]
	for i := 1; i < len(c.Args); i++ {
		switch c.Args[i] {
		case "--set":
			i++
			j.sets = append(j.sets, c.Args[i])
		case "--set-string":
			i++
			j.setStrs = append(j.setStrs, c.Args[i])
		case "--namespace", "--version":
			i++ // the env says the same
		}
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.Name == "values" && v.Projected != nil:
			for _, src := range v.Projected.Sources {
				if src.Secret == nil {
					continue
				}
				for _, it := range src.Secret.Items {
					if strings.HasSuffix(it.Path, ".yaml") {
						j.valueFiles = append(j.valueFiles, valueFile{path: it.Path, secret: src.Secret.Name, key: it.Key})
					}
				}
			}
		case v.Name == "content" && v.ConfigMap != nil:
			j.content = v.ConfigMap.Name
		}
	}
	sort.Slice(j.valueFiles, func(a, b int) bool { return j.valueFiles[a].path < j.valueFiles[b].path })
	return j, nil
}

// run is one run of the container: the lines it writes to its
// termination log, and its error (a non-zero exit).
func (e *Executor) run(ctx context.Context, p *corev1.Pod) (termLog []string, err error) {
	j, err := readJob(p)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "klipperhelm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg, err := cluster.HelmConfiguration(e.getter, j.namespace, j.driver, nil)
	if err != nil {
		return nil, err
	}
	say := func(s string) { termLog = append(termLog, s) }
	newest, err := newestRelease(cfg, j.name)
	if err != nil {
		return termLog, err
	}
	status, revision := "", ""
	if newest != nil {
		status, revision = newest.Info.Status.String(), strconv.Itoa(newest.Version)
	}
	if j.action == "delete" {
		if newest == nil {
			say("No helm chart installed; nothing to delete")
			return termLog, nil
		}
		if !e.revisionExpected(j, revision, say) {
			return termLog, nil
		}
		say("Uninstalling helm chart")
		_, _ = uninstall(cfg).Run(j.name) // klipper-helm: `|| true`
		return termLog, nil
	}
	ch, err := e.loadChart(ctx, j, dir)
	if err != nil {
		return termLog, err
	}
	vals, err := e.values(ctx, j, dir)
	if err != nil {
		return termLog, err
	}
	if newest == nil {
		say("Installing helm chart")
		return termLog, e.install(ctx, cfg, j, ch, vals)
	}
	if !e.revisionExpected(j, revision, say) {
		return termLog, nil
	}
	switch status {
	case "pending-install", "pending-upgrade", "pending-rollback", "superseded", "uninstalling":
		say(fmt.Sprintf("Resetting helm release status from '%s' to 'failed'", status))
		newest.Info.Status = helmstatus.StatusFailed
		if err := cfg.Releases.Update(newest); err != nil {
			return termLog, err
		}
		if status == "pending-upgrade" || status == "superseded" {
			say("Retrying upgrade of helm chart")
			return termLog, e.upgrade(ctx, cfg, j, ch, vals)
		}
		status = "failed"
	}
	if status == "deployed" {
		say("Upgrading helm chart")
		return termLog, e.upgrade(ctx, cfg, j, ch, vals)
	}
	switch j.failurePolicy {
	case "abort":
		say(fmt.Sprintf("Release status is '%s' and failure policy is 'abort'; waiting for operator intervention", status))
		return termLog, fmt.Errorf("release status is %s and failure policy is abort", status)
	case "", "reinstall":
		say(fmt.Sprintf("Uninstalling %s helm chart", status))
		if _, err := uninstall(cfg).Run(j.name); err != nil {
			return termLog, err
		}
		say("Installing helm chart")
		return termLog, e.install(ctx, cfg, j, ch, vals)
	case "retry":
		say("Upgrading " + j.name + " from failed state")
		_ = e.upgrade(ctx, cfg, j, ch, vals) // klipper-helm: exit 0
		return termLog, nil
	default:
		say(fmt.Sprintf("Unknown failure policy '%s'", j.failurePolicy))
		return termLog, fmt.Errorf("unknown failure policy %q", j.failurePolicy)
	}
}

// revisionExpected is klipper-helm's check_revision: false (and a line in
// the termination log; the run succeeds) when the newest revision is not
// the one helm-controller saw.
func (e *Executor) revisionExpected(j job, revision string, say func(string)) bool {
	if j.expected != "" && j.expected != revision {
		say(fmt.Sprintf("Current release revision %s does not match expected revision %s", revision, j.expected))
		return false
	}
	return true
}

func (e *Executor) count(j job) {
	e.mu.Lock()
	e.runs[j.chartNamespace+"/"+j.helmChart]++
	e.mu.Unlock()
}

func (e *Executor) labels(j job) map[string]string {
	if j.configHash == "" {
		return nil
	}
	return map[string]string{KeyConfigHash: j.configHash}
}

func (e *Executor) install(ctx context.Context, cfg *action.Configuration, j job, ch *chart.Chart, vals map[string]any) error {
	e.count(j)
	e.getter.Reset() // a chart may bring CRDs
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.Timeout, in.Labels = j.name, j.namespace, j.timeout, e.labels(j)
	in.CreateNamespace = true
	// helm install --server-side (true unless SERVER_SIDE=false)
	// [--force-conflicts]; klipper-helm waits for hooks only
	in.ServerSideApply, in.ForceConflicts = j.serverSide != "false", j.forceConflicts
	in.WaitStrategy = kube.HookOnlyStrategy
	_, err := in.RunWithContext(ctx, ch, vals)
	return err
}

// uninstall is helm uninstall, waiting for hooks only.
func uninstall(cfg *action.Configuration) *action.Uninstall {
	un := action.NewUninstall(cfg)
	un.WaitStrategy = kube.HookOnlyStrategy
	return un
}

func (e *Executor) upgrade(ctx context.Context, cfg *action.Configuration, j job, ch *chart.Chart, vals map[string]any) error {
	e.count(j)
	e.getter.Reset()
	up := action.NewUpgrade(cfg)
	up.Namespace, up.Timeout, up.Labels = j.namespace, j.timeout, e.labels(j)
	up.ServerSideApply, up.ForceConflicts = j.serverSide, j.forceConflicts
	up.WaitStrategy = kube.HookOnlyStrategy
	_, err := up.RunWithContext(ctx, j.name, ch, vals)
	return err
}

// newestRelease is the newest revision of the release; nil when none.
func newestRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	hist, err := cfg.Releases.History(name)
	if errors.Is(err, driver.ErrReleaseNotFound) || len(hist) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	revs, err := helmrelease.Revisions(hist)
	if err != nil {
		return nil, fmt.Errorf("release %s: %w", name, err)
	}
	return revs[len(revs)-1], nil
}

// values writes the values files where the pod would see them and merges
// them with the set flags as Helm does.
func (e *Executor) values(ctx context.Context, j job, dir string) (map[string]any, error) {
	opts := values.Options{Values: j.sets, StringValues: j.setStrs}
	for _, f := range j.valueFiles {
		s, err := e.kube.CoreV1().Secrets(j.chartNamespace).Get(ctx, f.secret, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("values file %s: %w", f.path, err)
		}
		data, ok := s.Data[f.key]
		if !ok {
			return nil, fmt.Errorf("values file %s: secret %s has no key %s", f.path, f.secret, f.key)
		}
		path := filepath.Join(dir, f.path)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
		opts.ValueFiles = append(opts.ValueFiles, path)
	}
	return opts.MergeValues(getter.Providers{})
}

// loadChart is the chart of the run: the HelmChart's chartContent, else
// CHART of repository REPO.
func (e *Executor) loadChart(ctx context.Context, j job, dir string) (*chart.Chart, error) {
	if j.content != "" {
		cm, err := e.kube.CoreV1().ConfigMaps(j.chartNamespace).Get(ctx, j.content, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if enc, ok := cm.Data[j.name+".tgz.base64"]; ok {
			data, err := base64.StdEncoding.DecodeString(enc)
			if err != nil {
				return nil, fmt.Errorf("chart content: %w", err)
			}
			return loader.LoadArchive(bytes.NewReader(data))
		}
	}
	if j.repo == "" {
		return nil, fmt.Errorf("chart %q: no repository and no chart content (charts at a URL are not run here)", j.chartRef)
	}
	src, err := chartpkg.NewSource(j.repo, chartpkg.SourceOptions{})
	if err != nil {
		return nil, err
	}
	name := j.chartRef[strings.LastIndex(j.chartRef, "/")+1:]
	version := j.version
	if version == "" {
		vs, err := src.Versions(ctx, name)
		if err != nil {
			return nil, err
		}
		version = vs[0]
	}
	return src.Load(ctx, name, version)
}
