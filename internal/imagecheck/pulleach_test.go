package imagecheck

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
)

const eachPassword = "s3cr3t-pa55w0rd"

// dockerConfigJSON is a kubernetes.io/dockerconfigjson Secret's
// .dockerconfigjson for user:password at registry.
func dockerConfigJSON(registry, user, password string) string {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, registry, auth)
}

func pullSecret(name, registry, password string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(dockerConfigJSON(registry, "puller", password))}}
}

// Two pull secrets for one registry, the first with a stale password: the
// kubelet tries the pull with each in turn, so the pod starts; the check
// does the same (credentials.lookup, every match in the kubelet's order;
// PullEach, one pull each), against a real registry behind htpasswd.
func TestPullEachPullSecret(t *testing.T) {
	dir := t.TempDir()
	reg, err := ociregistry.Start(context.Background(), dir, ociregistry.Options{Users: map[string]string{"puller": eachPassword}})
	require.NoError(t, err)
	t.Cleanup(reg.Close)
	_, err = reg.PushImage("secret-app", "1.0", "linux/amd64")
	require.NoError(t, err)
	path := filepath.Join(dir, "registries.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, "configs:\n  %q:\n    tls:\n      ca_file: %s\n", reg.Host, reg.CAFile), 0o600))
	r, err := LoadRegistries(path, "/nonexistent-host-root")
	require.NoError(t, err)
	p := NewPuller(r, 0)
	defer p.Close()

	kube := fake.NewClientset(
		pullSecret("stale", reg.Host, "an-old-password"),
		pullSecret("current", reg.Host, eachPassword),
		pullSecret("elsewhere", "other.example.com", eachPassword), // another registry's: not tried
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "app"}, ImagePullSecrets: []corev1.LocalObjectReference{{Name: "current"}}},
	)
	img, err := registries.ParseImage(reg.Host + "/secret-app:1.0")
	require.NoError(t, err)
	use := Use{Where: "Deployment demo/app, container app", Image: img.Written, Namespace: "demo", ServiceAccount: "default",
		PullSecrets: []string{"stale", "elsewhere", "current"}}
	newCreds := func() *credentials {
		return &credentials{kube: kube, rendered: map[string]*unstructured.Unstructured{}, keychains: map[string]*keychainOnce{}}
	}

	// the port: the pod's credentials looked up, each tried in turn
	port := &Port{Puller: p, Jobs: 1}
	pulls, refused, err := port.pull(t.Context(), []Use{use}, newCreds())
	require.NoError(t, err)
	assert.Empty(t, refused)
	require.Len(t, pulls, 1)
	require.NotNil(t, pulls[0].pulled.Found, "the port pulls with each secret: %+v", pulls[0].pulled.Tried)

	creds, problem, err := newCreds().lookup(t.Context(), use, img)
	require.NoError(t, err)
	require.Empty(t, problem)
	require.Len(t, creds, 2, "each secret for the image's registry, in the pod's order")

	pulled := p.PullEach(t.Context(), img, creds)
	require.NotNil(t, pulled.Found, "found with the second secret: %+v", pulled.Tried)
	require.Len(t, pulled.Tried, 2, "one pull per credential, each endpoint's answer kept")
	assert.True(t, pulled.Tried[0].Unauthorized)
	assert.Contains(t, pulled.Tried[0].Said, "credential 1 of 2: UNAUTHORIZED")
	assert.True(t, pulled.Tried[1].Found)
	assert.Same(t, &pulled.Tried[1], pulled.Found, "Found points into Tried")
	assert.Equal(t, []string{"linux/amd64"}, pulled.Found.Platforms)

	only := p.PullEach(t.Context(), img, creds[:1])
	assert.Nil(t, only.Found, "the stale secret alone does not pull it")
	require.Len(t, only.Tried, 1)
	assert.True(t, only.Tried[0].Unauthorized)
	assert.NotContains(t, only.Tried[0].Said, "credential", "one credential: the answer as Pull gives it")
	for _, a := range append(pulled.Tried, only.Tried...) {
		assert.NotContains(t, a.Said, eachPassword)
	}

	// the ServiceAccount's secrets only when the pod names none, as the
	// ServiceAccount admission plugin copies them into such a pod
	sa := use
	sa.ServiceAccount, sa.PullSecrets = "app", []string{"stale"}
	creds, _, err = newCreds().lookup(t.Context(), sa, img)
	require.NoError(t, err)
	require.Len(t, creds, 1, "the pod's own secret only")
	assert.Nil(t, p.PullEach(t.Context(), img, creds).Found)
	sa.PullSecrets = nil
	creds, _, err = newCreds().lookup(t.Context(), sa, img)
	require.NoError(t, err)
	require.Len(t, creds, 1, "the ServiceAccount's")
	assert.NotNil(t, p.PullEach(t.Context(), img, creds).Found)

	// a Secret the render writes is the render's (its stringData too),
	// not the cluster's
	rendered := newCreds()
	rendered.rendered["Secret demo/stale"] = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"namespace": "demo", "name": "stale"},
		"type": string(corev1.SecretTypeDockerConfigJson), "stringData": map[string]any{corev1.DockerConfigJsonKey: dockerConfigJSON(reg.Host, "puller", eachPassword)},
	}}
	creds, _, err = rendered.lookup(t.Context(), Use{Where: use.Where, Namespace: "demo", ServiceAccount: "default", PullSecrets: []string{"stale"}}, img)
	require.NoError(t, err)
	require.Len(t, creds, 1)
	assert.NotNil(t, p.PullEach(t.Context(), img, creds).Found)

	// no secret for its registry: registries.yaml's (none here)
	creds, _, err = newCreds().lookup(t.Context(), Use{Where: use.Where, Namespace: "demo", ServiceAccount: "default", PullSecrets: []string{"elsewhere"}}, img)
	require.NoError(t, err)
	assert.Empty(t, creds)
	none := p.PullEach(t.Context(), img, creds)
	assert.Nil(t, none.Found)
	require.Len(t, none.Tried, 1)
	assert.True(t, none.Tried[0].Unauthorized)
}
