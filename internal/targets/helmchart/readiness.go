package helmchart

import (
	"fmt"
	"strconv"
	"strings"

	common "helm.sh/helm/v4/pkg/release/common"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/helmrelease"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// AnnotationReleaseRevision is written with an apply: the newest revision
// of the Helm release when it was read. helm-controller passes the
// revision it finds to its Job (EXPECTED_RELEASE_REVISION), so a Job made
// after the apply expects at least this revision, and the Job that
// deployed an earlier spec expects less: it never counts.
const AnnotationReleaseRevision = "chart-upgrader.io/release-revision"

// View is one look at everything the readiness of a HelmChart follows.
type View struct {
	Chart *HelmChart
	// Secret is the data of the values Secret helm-controller writes;
	// nil when it does not exist.
	Secret map[string][]byte
	Job    *batchv1.Job // helm-install-NAME; nil when it does not exist
	// PodFailures counts the failed runs of the Job's pods (container
	// restarts under restartPolicy OnFailure, and failed pods);
	// PodMessage is the termination message of the newest one.
	PodFailures int
	PodMessage  string
	Release     *Release   // the release's newest revision; nil when none
	Resources   *Resources // the readiness of that revision's resources
}

// Release is what readiness uses of a Helm release revision.
type Release struct {
	Namespace, Name string
	Revision        int
	Status          common.Status
	ChartVersion    string
	ConfigHash      string // the label klipper-helm puts on it
}

// Resources is the readiness of a release revision's objects.
type Resources = helmrelease.Resources

// Judge says whether what want describes has been deployed: the HelmChart
// carries our apply (upgrade.JudgeTarget); helm-controller wrote its values
// Secret and made a Job for this spec (its version, its set flags, a
// release revision expected at least as new as the one the apply saw); the
// Job completed; the release's newest revision carries the Job's config hash,
// is deployed at the wanted version, and its resources are ready. A Job that
// failed, a HelmChart whose Failed condition is True and a failed release
// are reported in Readiness.Failed.
func Judge(want upgrade.Want, v View) upgrade.Readiness {
	r := upgrade.Readiness{DesiredCount: 1, Unit: "resources"}
	h := v.Chart
	var o *upgrade.Observed
	if h != nil {
		o = h.observed(nil)
	}
	if !upgrade.JudgeTarget(&r, Kind, o, want) {
		return r
	}
	if _, ok := h.Annotations[AnnotationUnmanaged]; ok {
		r.Wait("helm-controller leaves the helmchart alone (annotation %s)", AnnotationUnmanaged)
		return r
	}
	if c, ok := h.Condition(ConditionFailed); ok && c.Status == string(corev1.ConditionTrue) {
		r.Failed = fmt.Sprintf("helmchart %s/%s: condition Failed: %s", h.Namespace, h.Name, join(c.Reason, c.Message))
	}
	secret := "secret " + h.Namespace + "/" + ValuesSecretName(h.Name)
	switch {
	case v.Secret == nil:
		r.Wait("helm-controller has not written %s yet", secret)
		return r
	case string(v.Secret["HelmChartValuesContent"]) != h.ValuesContent:
		r.Wait("%s holds the values of an earlier spec: helm-controller has not seen this one yet", secret)
		return r
	}
	job := "job " + h.Namespace + "/" + JobName(h.Name)
	if v.Job == nil {
		r.Wait("helm-controller has not made %s yet", job)
		return r
	}
	if why := jobForSpec(v.Job, h); why != "" {
		r.Wait("%s is for an earlier spec (%s)", job, why)
		return r
	}
	switch jobState(v.Job) {
	case batchv1.JobFailed:
		c := jobCondition(v.Job, batchv1.JobFailed)
		r.Failed = fmt.Sprintf("%s failed: %s%s%s", job, join(c.Reason, c.Message), podMessage(v.PodMessage), logsHint(h))
		r.Terminal = true // helm-controller runs it again only for a changed spec
		return r
	case batchv1.JobComplete:
	default:
		if v.PodFailures > 0 {
			r.Failed = fmt.Sprintf("%s: its pod failed %d time(s) and is retried%s%s", job, v.PodFailures, podMessage(v.PodMessage), logsHint(h))
		}
		if v.Job.Spec.Suspend != nil && *v.Job.Spec.Suspend {
			r.Wait("%s is suspended (helm-controller resumes it once the Job controller has seen it)", job)
		} else {
			r.Wait("%s has not completed (%d active)", job, v.Job.Status.Active)
		}
		return r
	}
	hash := jobEnv(v.Job, "CONFIG_HASH")
	rel := v.Release
	switch {
	case rel == nil:
		r.Wait("%s completed, but helm release %s/%s does not exist", job, h.TargetNamespace, h.ReleaseName())
		return r
	case rel.ConfigHash != hash:
		r.Wait("helm release %s/%s revision %d was not deployed by %s (config hash)", rel.Namespace, rel.Name, rel.Revision, job)
		return r
	}
	rev := helmrelease.Revision{Namespace: rel.Namespace, Name: rel.Name, Number: rel.Revision, Status: rel.Status}
	if !helmrelease.JudgeStatus(&r, rev) {
		return r // failed: the Job may run again (its failure policy), so not terminal
	}
	if rel.ChartVersion != want.Version && strings.TrimPrefix(rel.ChartVersion, "v") != strings.TrimPrefix(want.Version, "v") {
		r.Wait("%s deploys chart version %s, not %s", rev, rel.ChartVersion, want.Version)
		return r
	}
	helmrelease.JudgeObjects(&r, rev, v.Resources)
	return r
}

// jobForSpec says why job was not made for the HelmChart as it is now, or
// "" when it was: its version, its set flags, and (when the apply recorded
// one) the release revision it expects.
func jobForSpec(job *batchv1.Job, h *HelmChart) string {
	if got := jobEnv(job, "VERSION"); got != h.Version {
		return fmt.Sprintf("version %q, not %q", got, h.Version)
	}
	var want []string
	for _, e := range h.Set {
		flag, arg := setArg(e)
		want = append(want, flag, arg)
	}
	if got := jobSetArgs(job); strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		return "other set flags"
	}
	if base := h.Annotations[AnnotationReleaseRevision]; base != "" {
		b, _ := strconv.Atoi(base)
		e, err := strconv.Atoi(jobEnv(job, "EXPECTED_RELEASE_REVISION"))
		if err != nil || e < b {
			return fmt.Sprintf("it expects release revision %s, older than %d", jobEnv(job, "EXPECTED_RELEASE_REVISION"), b)
		}
	}
	return ""
}

// jobEnv is the value of an environment variable of the Job's container.
func jobEnv(job *batchv1.Job, name string) string {
	for _, c := range job.Spec.Template.Spec.Containers {
		for _, e := range c.Env {
			if e.Name == name {
				return e.Value
			}
		}
	}
	return ""
}

// jobSetArgs are the --set and --set-string flags of the Job's container.
func jobSetArgs(job *batchv1.Job) []string {
	var out []string
	for _, c := range job.Spec.Template.Spec.Containers {
		for i := 0; i+1 < len(c.Args); i++ {
			if c.Args[i] == "--set" || c.Args[i] == "--set-string" {
				out = append(out, c.Args[i], c.Args[i+1])
				i++
			}
		}
	}
	return out
}

// jobState is the Job's terminal condition (Complete or Failed) when
// True; "" while it runs.
// JobRunning reports whether helm-controller's Job is still running: not
// complete, not failed, with an active pod.
func JobRunning(job *batchv1.Job) bool {
	return job != nil && jobState(job) == "" && job.Status.Active > 0
}

func jobState(job *batchv1.Job) batchv1.JobConditionType {
	for _, t := range []batchv1.JobConditionType{batchv1.JobFailed, batchv1.JobComplete} {
		if c := jobCondition(job, t); c.Status == corev1.ConditionTrue {
			return t
		}
	}
	return ""
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) batchv1.JobCondition {
	for _, c := range job.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return batchv1.JobCondition{}
}

// podMessage is the tail of a failed pod's termination message, as a
// suffix.
func podMessage(m string) string {
	m = strings.TrimSpace(m)
	if m == "" {
		return ""
	}
	lines := strings.Split(m, "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; its pod's termination message ends: " + strings.Join(lines, " | ")
}

// logsHint says where Helm's own error is: klipper-helm writes only its
// steps to the termination message, Helm's output goes to the pod's log.
func logsHint(h *HelmChart) string {
	return fmt.Sprintf(" (Helm's error: kubectl -n %s logs job/%s)", h.Namespace, JobName(h.Name))
}

func join(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// Health is what preflight refuses on: a HelmChart helm-controller leaves
// alone, whose chart is a URL chart-upgrader cannot move, whose last Job
// failed, or whose release is pending or failed.
func Health(v View) []string {
	h := v.Chart
	var problems []string
	if _, ok := h.Annotations[AnnotationUnmanaged]; ok {
		problems = append(problems, fmt.Sprintf("helmchart %s/%s has annotation %s: helm-controller would not deploy an upgrade", h.Namespace, h.Name, AnnotationUnmanaged))
	}
	if h.ChartContent == "" && strings.Contains(h.Chart, "://") {
		problems = append(problems, fmt.Sprintf("helmchart %s/%s deploys the chart at URL %s: the URL names one version, and chart-upgrader cannot know the URL of another; use spec.repo and spec.chart, or spec.chartContent", h.Namespace, h.Name, h.Chart))
	}
	if c, ok := h.Condition(ConditionFailed); ok && c.Status == string(corev1.ConditionTrue) {
		problems = append(problems, fmt.Sprintf("helmchart %s/%s: condition Failed: %s", h.Namespace, h.Name, join(c.Reason, c.Message)))
	}
	if v.Job != nil {
		job := "job " + h.Namespace + "/" + JobName(h.Name)
		switch {
		case jobState(v.Job) == batchv1.JobFailed:
			c := jobCondition(v.Job, batchv1.JobFailed)
			problems = append(problems, fmt.Sprintf("the last %s failed: %s%s%s", job, join(c.Reason, c.Message), podMessage(v.PodMessage), logsHint(h)))
		case jobState(v.Job) == "" && v.PodFailures > 0:
			problems = append(problems, fmt.Sprintf("%s is failing (its pod failed %d time(s))%s%s", job, v.PodFailures, podMessage(v.PodMessage), logsHint(h)))
		}
	}
	return problems
}
