package e2erollout

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/tests/kubelet"
	"github.com/chart-upgrader/chart-upgrader/tests/noderun"
	"github.com/chart-upgrader/chart-upgrader/tests/ociregistry"
	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

// The images world: five real registries on loopback (distribution's, TLS
// with a CA of each one's own), the nodes' registries.yaml naming them,
// and the test kubelet pulling the images of the pods held for it.
var images struct {
	origin, mirror *ociregistry.Registry
	// private is behind htpasswd, its credentials in registries.yaml;
	// secret is behind htpasswd, its credentials only in a pull secret.
	private, secret *ociregistry.Registry
	// counted serves one test alone, which counts what it is asked
	counted    *ociregistry.Registry
	digest     string // of origin's app:2.0.0, an index
	registries string // the registries.yaml
}

// imagePassword is the password of both private registries' user.
const imagePassword = "pull-s3cr3t-9f2c"

// startImages starts the images world and the test kubelet.
func startImages(ctx context.Context, env *testenv.Env) error {
	dir, err := os.MkdirTemp("", "e2erollout-registries")
	if err != nil {
		return err
	}
	start := func(sub string, opts ...ociregistry.Options) (*ociregistry.Registry, error) {
		d := filepath.Join(dir, sub)
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, err
		}
		return ociregistry.Start(ctx, d, opts...)
	}
	users := ociregistry.Options{Users: map[string]string{"puller": imagePassword}}
	if images.origin, err = start("origin"); err != nil {
		return err
	}
	if images.mirror, err = start("mirror"); err != nil {
		return err
	}
	if images.private, err = start("private", users); err != nil {
		return err
	}
	if images.secret, err = start("secret", users); err != nil {
		return err
	}
	if images.counted, err = start("counted"); err != nil {
		return err
	}
	pushes := []struct {
		r         *ociregistry.Registry
		repo, tag string
		platforms []string
	}{
		{images.origin, "app", "1.0.0", []string{"linux/amd64"}},
		{images.origin, "app", "2.0.0", []string{"linux/amd64", "linux/arm64"}},
		{images.origin, "arm-only", "1.0", []string{"linux/arm64"}},
		{images.mirror, "app", "2.0.0", []string{"linux/amd64"}},
		{images.mirror, "library/nginx", "2.0.0", []string{"linux/amd64"}},
		{images.mirror, "mirrored/app", "2.0.0", []string{"linux/amd64"}},
		{images.private, "secret-app", "1.0", []string{"linux/amd64"}},
		{images.secret, "secret-app", "1.0", []string{"linux/amd64"}},
		{images.counted, "solo", "1.0", []string{"linux/amd64"}},
	}
	for _, p := range pushes {
		d, err := p.r.PushImage(p.repo, p.tag, p.platforms...)
		if err != nil {
			return fmt.Errorf("pushing %s/%s:%s: %w", p.r.Host, p.repo, p.tag, err)
		}
		if p.r == images.origin && p.tag == "2.0.0" {
			images.digest = d
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mirrors:\n  registry.example.invalid:\n    endpoint: [\"https://%s\"]\n  docker.io:\n    endpoint: [\"https://%s\"]\n"+
		"  rewritten.example.invalid:\n    endpoint: [\"https://%s\"]\n    rewrite:\n      \"^(app)$\": \"mirrored/$1\"\nconfigs:\n",
		images.mirror.Host, images.mirror.Host, images.mirror.Host)
	for _, r := range []*ociregistry.Registry{images.origin, images.mirror, images.private, images.secret, images.counted} {
		fmt.Fprintf(&b, "  %q:\n    tls:\n      ca_file: %s\n", r.Host, r.CAFile)
		if r == images.private {
			fmt.Fprintf(&b, "    auth:\n      username: puller\n      password: %s\n", imagePassword)
		}
	}
	images.registries = filepath.Join(dir, "registries.yaml")
	if err := os.WriteFile(images.registries, []byte(b.String()), 0o600); err != nil {
		return err
	}
	k := &kubelet.Kubelet{Kube: env.Kube(), Registries: images.registries}
	return k.Start(ctx)
}

// imagesNode is a node whose preflights check the images (with
// images.registries, given by the caller).
func imagesNode(t *testing.T) noderun.Node {
	n := noderun.New(t, "node-1")
	n.Images = true
	return n
}

// pullHold holds the pods for the test kubelet.
var pullHold = map[string]any{testenv.HoldAnnotation: testenv.HoldPull}

// pullSecret creates Secret name in ns: a dockerconfigjson for the
// secret registry.
func pullSecret(t *testing.T, env *testenv.Env, ns, name string) {
	t.Helper()
	pullSecretWith(t, env, ns, name, imagePassword)
}

// pullSecretWith is pullSecret with another password.
func pullSecretWith(t *testing.T, env *testenv.Env, ns, name, password string) {
	t.Helper()
	auth := base64.StdEncoding.EncodeToString([]byte("puller:" + password))
	cfg, err := json.Marshal(map[string]any{"auths": map[string]any{images.secret.Host: map[string]any{"auth": auth}}})
	require.NoError(t, err)
	_, err = env.Kube().CoreV1().Secrets(ns).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// imageCases are the images an upgrade runs that the nodes could not pull
// (preflight refuses them, and the applier's upgrade never rolls out:
// its pods sit in ImagePullBackOff), each with a control that pulls.
func imageCases() []rolloutCase {
	o := images.origin.Host
	held := func(v map[string]any) map[string]any {
		v["podAnnotations"] = pullHold
		return v
	}
	withSecret := func(t *testing.T, env *testenv.Env, ns string) { pullSecret(t, env, ns, "regcred") }
	withStaleThenRight := func(t *testing.T, env *testenv.Env, ns string) {
		pullSecretWith(t, env, ns, "stale", "an-old-password")
		pullSecret(t, env, ns, "regcred")
	}
	withServiceAccount := func(t *testing.T, env *testenv.Env, ns string) {
		pullSecret(t, env, ns, "regcred")
		_, err := env.Kube().CoreV1().ServiceAccounts(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "puller"},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	return []rolloutCase{
		{"image: a tag the registry lacks", held(map[string]any{"image": o + "/app:9.9.9"}), nil, nil,
			"container web, is served by no endpoint the nodes pull it from: https://" + o + "/v2 (the registry; as app): MANIFEST_UNKNOWN"},
		{"image: a repository the registry lacks", held(map[string]any{"image": o + "/nothere:1"}), nil, nil, "MANIFEST_UNKNOWN"},
		{"image: an index holding the nodes' platform", held(map[string]any{"image": o + "/app:2.0.0"}), nil, nil, ""},
		{"image: an init container's, missing", held(map[string]any{"initImage": o + "/app:9.9.9"}), nil, nil, "init container init, is served by no endpoint"},
		{"image: an init container's", held(map[string]any{"initImage": o + "/app:2.0.0"}), nil, nil, ""},
		{"image: a pre-upgrade hook's, missing", held(map[string]any{"hookImage": o + "/app:9.9.9"}), nil, nil, "-migrate (a hook), container migrate"},
		{"image: a pre-upgrade hook's", held(map[string]any{"hookImage": o + "/app:2.0.0"}), nil, nil, ""},
		{"image: built for another platform", held(map[string]any{"image": o + "/arm-only:1.0"}), nil, nil, "has no linux/amd64 for the nodes its pods may run on"},
		{"image: by digest", held(map[string]any{"image": o + "/app@" + images.digest}), nil, nil, ""},
		{"image: a digest the registry lacks", held(map[string]any{"image": o + "/app@sha256:" + strings.Repeat("0", 64)}), nil, nil, "MANIFEST_UNKNOWN"},
		{"image: through a mirror", held(map[string]any{"image": "registry.example.invalid/app:2.0.0"}), nil, nil, ""},
		{"image: a short name through the docker.io mirror", held(map[string]any{"image": "nginx:2.0.0"}), nil, nil, ""},
		{"image: missing on the mirror, and the registry unknown", held(map[string]any{"image": "registry.example.invalid/app:7.7.7"}), nil, nil,
			"https://" + images.mirror.Host + "/v2 (a mirror; as app): MANIFEST_UNKNOWN: manifest unknown (HTTP 404); https://registry.example.invalid/v2 (the registry; as app): dial tcp: lookup registry.example.invalid"},
		{"image: rewritten on the mirror", held(map[string]any{"image": "rewritten.example.invalid/app:2.0.0"}), nil, nil, ""},
		{"image: a host nothing resolves", held(map[string]any{"image": "nowhere.invalid/x:1"}), nil, nil, "lookup nowhere.invalid"},
		{"image: private, credentials in registries.yaml", held(map[string]any{"image": images.private.Host + "/secret-app:1.0"}), nil, nil, ""},
		{"image: private, no credentials", held(map[string]any{"image": images.secret.Host + "/secret-app:1.0"}), nil, nil, "UNAUTHORIZED: authentication required (HTTP 401)"},
		{"image: private, the pod's imagePullSecrets", held(map[string]any{"image": images.secret.Host + "/secret-app:1.0", "pullSecrets": []any{map[string]any{"name": "regcred"}}}),
			withSecret, nil, ""},
		// the kubelet makes one pull per matching secret, in order: a stale
		// one first is no refusal
		{"image: private, two pull secrets, only the second right", held(map[string]any{"image": images.secret.Host + "/secret-app:1.0",
			"pullSecrets": []any{map[string]any{"name": "stale"}, map[string]any{"name": "regcred"}}}), withStaleThenRight, nil, ""},
		{"image: private, only a stale pull secret", held(map[string]any{"image": images.secret.Host + "/secret-app:1.0",
			"pullSecrets": []any{map[string]any{"name": "stale"}}}), withStaleThenRight, nil, "UNAUTHORIZED"},
		{"image: private, its ServiceAccount's imagePullSecrets", held(map[string]any{"image": images.secret.Host + "/secret-app:1.0", "serviceAccount": "puller"}),
			withServiceAccount, nil, ""},
	}
}

// Preflight refuses exactly the images the nodes cannot pull, as each
// kind's Plan ServiceAccount with the RBAC plan --check-chart derives (the
// pods' ServiceAccounts and pull secrets, by name): each case's upgrade is
// checked, then made by the kind's applier, whose pods the test kubelet
// pulls. No output holds a password.
func TestPreflightChecksTheImages(t *testing.T) {
	env := testenv.ForTest(t)
	shared(t, env)
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			for _, tc := range imageCases() {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					env := testenv.ForTest(t)
					ns := env.Namespace(t)
					chart, rel := name("i"), name("rel")
					writeCharts(t, chart, tc.changes)
					if tc.early != nil {
						tc.early(t, env, ns)
					}
					run, oracle := k.run(t, env, chart, ns, rel)
					before := len(noderun.Writes(t, env, ns))
					r := run("preflight", "-o", "json")
					assert.Equal(t, before, len(noderun.Writes(t, env, ns)), "preflight writes nothing")
					for _, out := range []string{r.Stdout, r.Stderr} {
						assert.NotContains(t, out, imagePassword)
						assert.NotContains(t, out, base64.StdEncoding.EncodeToString([]byte("puller:"+imagePassword)))
					}
					err := oracle()
					if tc.says == "" {
						r.RequireCode(t, 0)
						assert.Contains(t, r.Stdout, `"verdict": "pullable"`)
						require.NoError(t, err, "the applier's upgrade rolls out")
						return
					}
					r.RequireCode(t, outcome.ExitRefused)
					assert.Contains(t, r.Stderr, tc.says)
					require.Error(t, err, "the applier's upgrade does not roll out")
				})
			}
		})
	}
}

// heldRelease is a release at 1.0.0 whose 2.0.0 runs image (of the
// images world, which it starts first) in pods held for the test kubelet,
// and the release kind's run as its Plan's ServiceAccount, in a namespace
// of its own.
func heldRelease(t *testing.T, env *testenv.Env, image func() string) (run func(string, ...string) noderun.Result, ns, chart, rel string) {
	t.Helper()
	shared(t, env)
	ns = env.Namespace(t)
	chart, rel = name("i"), name("rel")
	writeCharts(t, chart, map[string]any{"image": image(), "podAnnotations": pullHold})
	run, _ = releaseKind(t, env, chart, ns, rel)
	return run, ns, chart, rel
}

// Without the check (--skip-image-check, or the spec's images.check:
// false) preflight says the images were not checked, passes an image no
// registry serves, and the upgrade's wait meets the pods the kubelet
// cannot start: ImagePullBackOff until the timeout (exit 4).
func TestImagesNotCheckedAreSaidSo(t *testing.T) {
	env := testenv.ForTest(t)
	run, ns, chart, rel := heldRelease(t, env, func() string { return images.origin.Host + "/app:9.9.9" })
	r := run("preflight", "--skip-image-check", "-o", "json")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, `"checked": false`)
	assert.Contains(t, r.Stdout, `"note": "images not checked: --skip-image-check"`)

	spec := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("apiVersion: chart-upgrader.io/v1alpha1\nkind: UpgradeSpec\ncharts:\n"+
		"- target: {kind: Release, namespace: "+ns+", name: "+rel+"}\n  chart: {name: "+chart+", source: "+world.charts+"}\n"+
		"  images: {check: false}\n  release: {rollbackOnFailure: false}\n"), 0o600))
	n := imagesNode(t)
	r = n.Run(t.Context(), env, "preflight", "--spec", spec, "--version", "2.0.0", "--registries-config", images.registries)
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, "images not checked: the spec says images.check: false")

	r = n.Run(t.Context(), env, "upgrade", "--spec", spec, "--version", "2.0.0", "--registries-config", images.registries, "--timeout", "10s")
	r.RequireCode(t, outcome.ExitTimeout)
	pods, err := env.Kube().CoreV1().Pods(ns).List(t.Context(), metav1.ListOptions{})
	require.NoError(t, err)
	backOff := 0
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if c.State.Waiting != nil && c.State.Waiting.Reason == "ImagePullBackOff" {
				backOff++
				assert.Contains(t, c.State.Waiting.Message, `Back-off pulling image "`+images.origin.Host+`/app:9.9.9"`)
			}
		}
	}
	assert.Equal(t, 1, backOff, "the new revision's pod cannot pull its image")
}

// What the check asks a registry for a single-platform tag, counted at
// the registry: by default the manifest (a GET, which Docker Hub counts
// as a pull) and its config (the platform); with --image-manifests head
// a HEAD alone, the platform not read and the report saying so.
func TestImageManifestsHeadAsksNoManifestGET(t *testing.T) {
	run, _, _, _ := heldRelease(t, testenv.ForTest(t), func() string { return images.counted.Host + "/solo:1.0" })
	images.counted.Asked() // the push

	r := run("preflight", "-o", "json")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, `"verdict": "pullable"`)
	assert.Contains(t, r.Stdout, `"linux/amd64"`, "the platform read")
	assert.Equal(t, map[string]int{"GET ping": 1, "GET manifest": 1, "GET blob": 1}, images.counted.Asked())

	r = run("preflight", "-o", "json", "--image-manifests", "head")
	r.RequireCode(t, 0)
	assert.Contains(t, r.Stdout, `"verdict": "pullable; its platform not read (--image-manifests=head)"`)
	assert.Contains(t, r.Stdout, "the platform of 1 single-platform images not read (--image-manifests=head)")
	assert.Equal(t, map[string]int{"GET ping": 1, "HEAD manifest": 1}, images.counted.Asked(), "no manifest GET")
}
