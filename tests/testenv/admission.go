package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RefusedLabel is the label an object carries for the admission policy of
// RefuseLabelled to refuse it; its value is the test's namespace.
const RefusedLabel = "testenv.chart-upgrader.io/refused"

// RefusedMessage is the message of the policy's refusal.
const RefusedMessage = "the test's admission policy refuses this object"

// RefuseLabelled installs, for the test, a ValidatingAdmissionPolicy that
// refuses to store any object labelled RefusedLabel: namespace: a refusal
// of admission, which no check before the write can see (preflight
// validates an object as the API server's own rules do, not its
// admission), as a cluster's policy engine refuses an object. It returns
// once the API server enforces it.
func RefuseLabelled(t *testing.T, env *Env, namespace string) {
	t.Helper()
	ctx := t.Context()
	adm := env.Kube().AdmissionregistrationV1()
	name := "refuse-" + namespace
	fail := admissionregistrationv1.Fail
	_, err := adm.ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: RefusedMessage}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = adm.ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{
				ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{RefusedLabel: namespace}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	// the API server loads policies from an informer: a dry run of a
	// labelled object is refused once it enforces this one
	probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refuse-probe", Namespace: namespace, Labels: map[string]string{RefusedLabel: namespace}}}
	require.Eventually(t, func() bool {
		_, err := env.Kube().CoreV1().ConfigMaps(namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err)
	}, 30*time.Second, 100*time.Millisecond, "the admission policy is enforced")
}
