package helmchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	common "helm.sh/helm/v4/pkg/release/common"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// applied is a HelmChart after our apply of 2.0.0 with valuesContent vc,
// having seen release revision 1.
func applied(t *testing.T, vc string) (*HelmChart, upgrade.Want) {
	h := &HelmChart{Namespace: "kube-system", Name: "app", Chart: "app", Version: "2.0.0", TargetNamespace: "apps",
		ValuesContent: vc, Set: []SetEntry{{Key: "replicas", Value: int64(2)}}}
	u, err := UserValues(h)
	require.NoError(t, err)
	hash, err := values.Hash(u)
	require.NoError(t, err)
	h.Annotations = map[string]string{specobject.AnnotationVersion: "2.0.0", specobject.AnnotationValuesHash: hash,
		AnnotationReleaseRevision: "1"}
	return h, upgrade.Want{Version: "2.0.0", ValuesHash: hash}
}

func job(version, expected, hash string, conds ...batchv1.JobCondition) *batchv1.Job {
	return &batchv1.Job{
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Args: []string{"install", "--namespace", "apps", "--version", version, "--set", "replicas=2"},
			Env: []corev1.EnvVar{{Name: "VERSION", Value: version}, {Name: "EXPECTED_RELEASE_REVISION", Value: expected},
				{Name: "CONFIG_HASH", Value: hash}}}}}}},
		Status: batchv1.JobStatus{Conditions: conds},
	}
}

var complete = batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}

func TestJudge(t *testing.T) {
	const vc = "image:\n  tag: v2\n"
	ready := func(t *testing.T) View {
		h, _ := applied(t, vc)
		return View{Chart: h, Secret: map[string][]byte{"HelmChartValuesContent": []byte(vc)},
			Job:       job("2.0.0", "1", "H2", complete),
			Release:   &Release{Namespace: "apps", Name: "app", Revision: 2, Status: "deployed", ChartVersion: "2.0.0", ConfigHash: "H2"},
			Resources: &Resources{Revision: 2, Ready: 3, Total: 3}}
	}
	cases := []struct {
		name    string
		change  func(v *View)
		waiting string
		failed  string
	}{
		{name: "ready"},
		{name: "values secret of the earlier spec", change: func(v *View) {
			v.Secret = map[string][]byte{"HelmChartValuesContent": []byte("image:\n  tag: v1\n")}
		}, waiting: "holds the values of an earlier spec"},
		{name: "no values secret", change: func(v *View) { v.Secret = nil }, waiting: "has not written secret"},
		{name: "the job of the version before", change: func(v *View) { v.Job = job("1.0.0", "0", "H1", complete) },
			waiting: `is for an earlier spec (version "1.0.0"`},
		{name: "the job of the same version before our apply", change: func(v *View) { v.Job = job("2.0.0", "0", "H0", complete) },
			waiting: "expects release revision 0, older than 1"},
		{name: "set flags of an earlier spec", change: func(v *View) {
			v.Job.Spec.Template.Spec.Containers[0].Args = []string{"install", "--set", "replicas=1"}
		}, waiting: "other set flags"},
		{name: "job running", change: func(v *View) { v.Job.Status = batchv1.JobStatus{Active: 1} }, waiting: "has not completed (1 active)"},
		{name: "job retrying after a failed run", change: func(v *View) {
			v.Job.Status = batchv1.JobStatus{Active: 1}
			v.PodFailures, v.PodMessage = 2, "Upgrading helm chart"
		}, waiting: "has not completed", failed: "its pod failed 2 time(s) and is retried; its pod's termination message ends: Upgrading helm chart (Helm's error: kubectl -n kube-system logs job/helm-install-app)"},
		{name: "job failed", change: func(v *View) {
			v.Job.Status = batchv1.JobStatus{Failed: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue,
				Reason: "BackoffLimitExceeded", Message: "Job has reached the specified backoff limit"}}}
			v.PodMessage = "Error: boom"
		}, failed: "job kube-system/helm-install-app failed: BackoffLimitExceeded: Job has reached the specified backoff limit; its pod's termination message ends: Error: boom"},
		{name: "helmchart Failed condition", change: func(v *View) {
			v.Chart.Conditions = []Condition{{Type: ConditionFailed, Status: "True", Reason: "Job failed", Message: "Job has reached configured number of retries without succeeding"}}
		}, failed: "condition Failed: Job failed"},
		{name: "release of an older job", change: func(v *View) { v.Release.ConfigHash = "H1" }, waiting: "was not deployed by job"},
		{name: "release pending", change: func(v *View) { v.Release.Status = "pending-upgrade" }, waiting: "revision 2 is pending-upgrade"},
		{name: "release failed", change: func(v *View) { v.Release.Status = "failed" }, failed: "revision 2 is failed"},
		{name: "release at another chart version", change: func(v *View) { v.Release.ChartVersion = "1.0.0" }, waiting: "deploys chart version 1.0.0, not 2.0.0"},
		{name: "resources not judged yet", change: func(v *View) { v.Resources = nil }, waiting: "not judged yet"},
		{name: "resources of the revision before", change: func(v *View) { v.Resources.Revision = 1 }, waiting: "not judged yet"},
		{name: "a resource not ready", change: func(v *View) {
			v.Resources = &Resources{Revision: 2, Ready: 2, Total: 3, NotReady: []string{"Deployment apps/web: InProgress: Available: 0/1"}}
		}, waiting: "1 of 3 objects"},
		{name: "values changed since our apply", change: func(v *View) { v.Chart.ValuesContent = "image:\n  tag: v9\n" },
			waiting: "values differ from the applied ones"},
		{name: "unmanaged", change: func(v *View) { v.Chart.Annotations[AnnotationUnmanaged] = "true" }, waiting: "leaves the helmchart alone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := ready(t)
			_, want := applied(t, vc)
			if tc.change != nil {
				tc.change(&v)
			}
			r := Judge(want, v)
			if tc.waiting == "" && tc.failed == "" {
				assert.True(t, r.Ready, "%+v", r)
				assert.Equal(t, int64(3), r.ReadyCount)
				return
			}
			assert.False(t, r.Ready)
			if tc.waiting != "" {
				require.NotEmpty(t, r.Waiting)
				assert.Contains(t, r.Waiting[0], tc.waiting)
			}
			assert.Contains(t, r.Failed, tc.failed)
			if tc.failed == "" {
				assert.Empty(t, r.Failed)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	h, _ := applied(t, "")
	assert.Empty(t, Health(View{Chart: h, Job: job("2.0.0", "1", "H", complete),
		Release: &Release{Namespace: "apps", Name: "app", Revision: 2, Status: "deployed"}}))
	failedJob := job("2.0.0", "1", "H", batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"})
	problems := Health(View{Chart: h, Job: failedJob, PodMessage: "Error: bad", PodFailures: 1,
		Release: &Release{Namespace: "apps", Name: "app", Revision: 3, Status: "pending-upgrade"}})
	require.Len(t, problems, 1, "the stuck release is StuckRelease's to judge")
	assert.Contains(t, problems[0], "the last job kube-system/helm-install-app failed: BackoffLimitExceeded; its pod's termination message ends: Error: bad")
	url := &HelmChart{Namespace: "kube-system", Name: "traefik", Chart: "https://%{KUBERNETES_API}%/static/charts/traefik-27.0.2.tgz"}
	assert.Contains(t, Health(View{Chart: url})[0], "deploys the chart at URL")
}

// A release left not deployed with no Job running is judged by what
// klipper-helm's next run does with it: pending-upgrade and superseded are
// upgraded at once whatever the policy; the others go by the failure
// policy, and only retry upgrades without uninstalling; a running Job is
// helm-controller's apply, live.
func TestStuckReleaseIsWhatKlipperHelmsNextRunDoes(t *testing.T) {
	rel := func(status string) *Release {
		return &Release{Namespace: "apps", Name: "app", Revision: 3, Status: common.Status(status), ChartVersion: "2.0.0"}
	}
	for _, tc := range []struct {
		status, policy string
		running        bool
		warning        string // "" when none
		problem        string // "" when none
	}{
		{"deployed", PolicyReinstall, false, "", ""},
		{"pending-upgrade", PolicyReinstall, true, "", ""},
		{"pending-install", PolicyReinstall, true, "", ""},
		{"pending-upgrade", PolicyReinstall, false, "marks it failed and upgrades at once, whatever the failure policy", ""},
		{"superseded", PolicyAbort, false, "upgrades at once", ""},
		{"pending-rollback", PolicyRetry, false, "marks it failed, then upgrades it (failure policy retry)", ""},
		{"failed", PolicyRetry, false, "next run (the Job this upgrade starts) upgrades it (failure policy retry)", ""},
		{"pending-install", PolicyReinstall, false, "", "marks it failed, then goes by failure policy reinstall: helm uninstall, then install"},
		{"failed", PolicyReinstall, false, "", "goes by failure policy reinstall: helm uninstall"},
		{"uninstalling", PolicyAbort, false, "", "goes by failure policy abort: it exits 1 without upgrading"},
		{"failed", PolicyAbort, false, "", "set helmchart.failurePolicy: retry"},
		{"unknown", PolicyRetry, false, "", "klipper-helm would not upgrade it"},
	} {
		w, problem := StuckRelease(rel(tc.status), tc.running, tc.policy)
		name := tc.status + "/" + tc.policy
		if tc.warning == "" {
			assert.Nil(t, w, name)
		} else if assert.NotNil(t, w, name) {
			assert.Contains(t, w.Message, tc.warning, name)
			assert.Contains(t, w.Message, "helm release apps/app revision 3 (chart 2.0.0) is "+tc.status+" and no Job of helm-controller runs it", name)
		}
		if tc.problem == "" {
			assert.Empty(t, problem, name)
		} else {
			assert.Contains(t, problem, tc.problem, name)
		}
	}
	assert.Equal(t, PolicyRetry, NextPolicy(&HelmChart{}, &HelmChartConfig{FailurePolicy: PolicyRetry}, Options{FailurePolicy: PolicyAbort}), "the HelmChartConfig's wins")
	assert.Equal(t, PolicyAbort, NextPolicy(&HelmChart{FailurePolicy: PolicyReinstall}, nil, Options{FailurePolicy: PolicyAbort}), "what the upgrade writes")
	assert.Equal(t, PolicyReinstall, NextPolicy(&HelmChart{}, nil, Options{FailurePolicy: PolicyKeep}), "keep: the one in force")
}
