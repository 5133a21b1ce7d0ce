package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStateOf(t *testing.T) {
	recorded := map[string]string{AnnotationCordoned: "2026-01-02T03:04:05Z"}
	other := map[string]string{"example.com/x": "y"}
	for _, tc := range []struct {
		name          string
		unschedulable bool
		annotations   map[string]string
		want          state
	}{
		{"fresh node", false, nil, schedulable},
		{"other annotations only", false, other, schedulable},
		{"our cordon", true, recorded, cordonedByUs},
		{"someone else's cordon", true, other, cordonedByOther},
		{"our record, uncordoned by someone else", false, recorded, recordOnly},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations},
				Spec: corev1.NodeSpec{Unschedulable: tc.unschedulable}}
			assert.Equal(t, tc.want, stateOf(n))
		})
	}
}

func TestPatches(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("CET", 3600))
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42","annotations":{"chart-upgrader.io/cordoned":"2026-01-02T02:04:05Z"}},"spec":{"unschedulable":true}}`,
		string(cordonPatch("42", at)))
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"43","annotations":{"chart-upgrader.io/cordoned":null}},"spec":{"unschedulable":false}}`,
		string(uncordonPatch("43")))
}

func TestDescribe(t *testing.T) {
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-0", Labels: map[string]string{"app": "web"}}}
	budget := func(name string, sel *metav1.LabelSelector, allowed int32) policyv1.PodDisruptionBudget {
		return policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:   policyv1.PodDisruptionBudgetSpec{Selector: sel},
			Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed}}
	}
	web := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	db := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}

	assert.Equal(t, "ns/web-0", describe(pod, nil))
	assert.Equal(t, "ns/web-0", describe(pod, []policyv1.PodDisruptionBudget{budget("db", db, 0), budget("none", nil, 0)}))
	assert.Equal(t, "ns/web-0", describe(pod, []policyv1.PodDisruptionBudget{budget("web", web, 1)}))
	assert.Equal(t, "ns/web-0 (PodDisruptionBudget ns/web allows no disruption)",
		describe(pod, []policyv1.PodDisruptionBudget{budget("db", db, 0), budget("web", web, 0)}))
	assert.Equal(t, "ns/web-0 (PodDisruptionBudget ns/all allows no disruption)",
		describe(pod, []policyv1.PodDisruptionBudget{budget("all", &metav1.LabelSelector{}, 0)}), "an empty selector selects every pod")

	now := metav1.Now()
	pod.DeletionTimestamp = &now
	assert.Equal(t, "ns/web-0 (terminating)", describe(pod, []policyv1.PodDisruptionBudget{budget("web", web, 0)}))
}

// The drain's end is a timeout when its context expired, or when
// client-go's rate limiter refused to wait past that deadline (the error
// the CI met: the limiter answers before the context expires).
func TestDeadlineHit(t *testing.T) {
	live, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	assert.False(t, deadlineHit(live, errors.New("Cannot evict pod")))
	limiter := fmt.Errorf("error when evicting pods/%q -n %q: %w", "web-0", "apps",
		errors.New("client rate limiter Wait returned an error: rate: Wait(n=1) would exceed context deadline"))
	assert.True(t, deadlineHit(live, limiter))
	expired, cancel2 := context.WithTimeout(context.Background(), -time.Second)
	defer cancel2()
	assert.True(t, deadlineHit(expired, errors.New("anything")))
}
