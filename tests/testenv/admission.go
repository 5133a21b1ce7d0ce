package testenv

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RefusedLabel is the label an object carries for the admission webhook
// of RefuseLabelled to refuse it; its value is the test's namespace.
const RefusedLabel = "testenv.chart-upgrader.io/refused"

// RefusedMessage is the message of the webhook's refusal.
const RefusedMessage = "the test's admission webhook refuses this object"

// RefuseLabelled installs, for the test, a validating admission webhook
// that refuses to store any object labelled RefusedLabel: namespace: a
// refusal of admission that no check before the write can judge (what a
// webhook answers cannot be known before it is called; preflight names
// it), as a cluster's policy engine refuses an object. The webhook is a
// real HTTPS server on loopback, its certificate the configuration's
// caBundle. It returns once the API server calls it.
func RefuseLabelled(t *testing.T, env *Env, namespace string) {
	t.Helper()
	ctx := t.Context()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: false,
			Result: &metav1.Status{Message: RefusedMessage, Code: http.StatusForbidden}}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/refuse"
	fail, none := admissionregistrationv1.Fail, admissionregistrationv1.SideEffectClassNone
	name := "refuse-" + namespace
	hooks := env.Kube().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	_, err := hooks.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "refuse.testenv.chart-upgrader.io", FailurePolicy: &fail, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &url,
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{RefusedLabel: namespace}},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = hooks.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// the API server loads webhooks from an informer: a dry run of a
	// labelled object is refused once it calls this one
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refuse-probe", Namespace: namespace, Labels: map[string]string{RefusedLabel: namespace}}}
	require.Eventually(t, func() bool {
		_, err := env.Kube().CoreV1().ConfigMaps(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
	}, 30*time.Second, 100*time.Millisecond, "the admission webhook is called")
}
