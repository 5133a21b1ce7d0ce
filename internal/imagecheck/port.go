// Package imagecheck checks, before an upgrade writes anything, that the
// nodes can pull every image it runs: every container and init container
// of every pod template the new revision renders, hooks included, and the
// images its values name for operators to run. Each image is asked for
// where a k3s or RKE2 node would pull it from (its registries.yaml:
// package registries), with the credentials the kubelet would use (the
// pod's imagePullSecrets and its ServiceAccount's, every one that matches
// the image in the kubelet's order, through the kubelet's own keyring, each
// tried in turn as the kubelet does; else registries.yaml's), through the
// node's containerd proxy when its k3s or RKE2 environment files set one, as
// a manifest (never a layer) that must hold the platform of the nodes the
// pod may run on. It is the upgrade.Images port. No credential is ever
// printed or logged.
package imagecheck

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/pkg/credentialprovider"
	credentialprovidersecrets "k8s.io/kubernetes/pkg/credentialprovider/secrets"
	"k8s.io/kubernetes/pkg/util/parsers"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/registries"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// WarnImage: an image a value names, which no pod template renders, the
// nodes could not pull (an operator may run it, or nothing may).
const WarnImage values.WarningKind = "image-not-pullable"

// Rendered is a target whose change renders a Helm release whose pods
// run on this cluster (every kind; a ManagedChart's on the local
// cluster). Adapters implement it without importing it.
type Rendered interface {
	// RenderedRelease is the release c renders over o on this cluster;
	// nil, with why, when its pods run elsewhere.
	RenderedRelease(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (rel *applycheck.Release, why string, err error)
}

// Port is the upgrade.Images of one target.
type Port struct {
	Kube   kubernetes.Interface
	Puller *Puller
	Target Rendered
	// Declared are the spec's images.values; Discover finds the values of
	// an image's shape too.
	Declared []Declared
	Discover bool
	// Jobs bounds the images asked for at once (0: DefaultJobs).
	Jobs int
}

var _ upgrade.Images = (*Port)(nil)

// Check is the upgrade.Images check.
func (p *Port) Check(ctx context.Context, o *upgrade.Observed, c upgrade.Change) (upgrade.ImageCheck, error) {
	start := time.Now()
	if c.Chart == nil || c.Chart.WithHooks == nil {
		return upgrade.ImageCheck{Note: "images not checked: no chart to render"}, nil
	}
	rel, why, err := p.Target.RenderedRelease(ctx, o, c)
	if err != nil {
		return upgrade.ImageCheck{}, err
	}
	if rel == nil {
		return upgrade.ImageCheck{Note: "images not checked: " + why}, nil
	}
	text, err := rel.Chart.WithHooks(rel.Values, rel.Name, rel.Namespace)
	if err != nil {
		return upgrade.ImageCheck{}, err
	}
	objs, err := manifest.Objects(text)
	if err != nil {
		return upgrade.ImageCheck{}, fmt.Errorf("reading the rendered manifest: %w", err)
	}
	uses := FromObjects(objs, rel.Namespace, hookObjects(objs, rel.Namespace))
	fromValues, err := FromValues(values.Overlay(rel.Chart.Defaults, rel.Values), p.Declared, p.Discover, uses)
	if err != nil {
		return upgrade.ImageCheck{}, outcome.BadInput(err)
	}
	uses = append(uses, fromValues...)
	nodes, err := p.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return upgrade.ImageCheck{}, fmt.Errorf("listing the nodes, for the platforms they pull: %w", err)
	}
	creds := &credentials{kube: p.Kube, rendered: indexed(objs, rel.Namespace), keychains: map[string]*keychainOnce{}}
	pulls, refused, err := p.pull(ctx, uses, creds)
	if err != nil {
		return upgrade.ImageCheck{}, err
	}
	out := judge(pulls, nodes.Items)
	out.Checked = true
	out.Refused = append(refused, out.Refused...)
	endpoints := map[string]bool{}
	for _, pl := range pulls {
		for _, a := range pl.pulled.Tried {
			endpoints[a.Endpoint.URL.String()] = true
		}
	}
	from := "registries.yaml: " + p.Puller.registries.From
	if proxy := p.Puller.registries.Proxy; proxy != "" {
		from += "; containerd's proxy: " + proxy
	}
	out.Note = fmt.Sprintf("image check: %d images (%d uses) asked for at %d endpoints as the nodes pull them (%s), %d requests in %s",
		len(pulls), len(uses), len(endpoints), from, p.Puller.Requests(), time.Since(start).Round(time.Millisecond))
	if len(nodes.Items) == 0 {
		out.Note += "; the cluster lists no node, so no platform was checked"
	} else if n := platformsNotRead(pulls); n > 0 {
		out.Note += fmt.Sprintf("; the platform of %d single-platform images not read (--image-manifests=head)", n)
	}
	return out, nil
}

// platformsNotRead counts the images found whose platform was not read.
func platformsNotRead(pulls []*pull) int {
	n := 0
	for _, pl := range pulls {
		if f := pl.pulled.Found; f != nil && f.PlatformNotRead {
			n++
		}
	}
	return n
}

// pull is one image asked for with one set of credentials, and its uses.
type pull struct {
	image  registries.Image
	uses   []Use
	pulled Pulled
}

// pull asks for every image of uses, each with the credentials of its
// uses (grouped), as many at once as p.Jobs. An image that is not a
// reference, or whose pull secrets may not be read, is refused.
func (p *Port) pull(ctx context.Context, uses []Use, creds *credentials) ([]*pull, []string, error) {
	var refused []string
	byKey := map[string]*pull{}
	var order []*pull
	for _, u := range uses {
		img, err := registries.ParseImage(u.Image)
		if err != nil {
			refused = append(refused, fmt.Sprintf("image %q of %s: %v: the kubelet would not pull it (InvalidImageName)", u.Image, u.Where, err))
			continue
		}
		key := img.String() + " " + creds.key(u)
		pl, ok := byKey[key]
		if !ok {
			pl = &pull{image: img}
			byKey[key] = pl
			order = append(order, pl)
		}
		pl.uses = append(pl.uses, u)
	}
	jobs := p.Jobs
	if jobs <= 0 {
		jobs = DefaultJobs
	}
	// one error (an API server that does not answer) stops the rest
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(jobs)
	var mu sync.Mutex
	for _, pl := range order {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			cri, problem, err := creds.lookup(gctx, pl.uses[0], pl.image)
			if err != nil {
				return err
			}
			if problem != "" {
				mu.Lock()
				refused = append(refused, problem)
				mu.Unlock()
				return nil
			}
			pl.pulled = p.Puller.PullEach(gctx, pl.image, cri)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var asked []*pull
	for _, pl := range order {
		if len(pl.pulled.Tried) > 0 {
			asked = append(asked, pl)
		}
	}
	sort.Strings(refused)
	return asked, refused, nil
}

// credentials are the pull secrets of the pods, read once per namespace,
// ServiceAccount and list of secrets: the render's own where it writes
// them (the ServiceAccount and Secrets the upgrade writes), else the
// cluster's.
type credentials struct {
	kube      kubernetes.Interface
	rendered  map[string]*unstructured.Unstructured // by "Kind namespace/name"
	mu        sync.Mutex
	keychains map[string]*keychainOnce
}

type keychainOnce struct {
	once    sync.Once
	keyring credentialprovider.DockerKeyring
	problem string
	err     error
}

// key is what tells u's credentials apart.
func (c *credentials) key(u Use) string {
	if u.Namespace == "" {
		return "" // a value: registries.yaml's only
	}
	return u.Namespace + "/" + u.ServiceAccount + "/" + strings.Join(u.PullSecrets, ",")
}

// lookup is the credentials the kubelet hands containerd for img, from u's
// pull secrets: every one that matches img, in the order the kubelet tries
// them (one pull each, the first that succeeds wins: PullEach); none when
// none matches; a problem (a refusal) when they may not be read.
func (c *credentials) lookup(ctx context.Context, u Use, img registries.Image) ([]authn.Authenticator, string, error) {
	if u.Namespace == "" {
		return nil, "", nil
	}
	key := c.key(u)
	c.mu.Lock()
	k, ok := c.keychains[key]
	if !ok {
		k = &keychainOnce{}
		c.keychains[key] = k
	}
	c.mu.Unlock()
	k.once.Do(func() { k.keyring, k.problem, k.err = c.keyring(ctx, u) })
	if k.err != nil || k.problem != "" {
		return nil, k.problem, k.err
	}
	// the kubelet looks the repository up by its normalized name, without
	// tag or digest (docker.io/library/nginx), which its keyring matches
	// against each secret's registry (the most specific first; a Docker
	// Hub secret may name docker.io or index.docker.io)
	repo, _, _, err := parsers.ParseImageName(img.Written)
	if err != nil {
		repo = img.Registry + "/" + img.Repository // the same, as ParseImage normalized it
	}
	found, _ := k.keyring.Lookup(repo)
	var out []authn.Authenticator
	for _, a := range found {
		out = append(out, authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password, Auth: a.Auth,
			IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}))
	}
	return out, "", nil
}

// keyring is the kubelet's keyring of u's pod: its imagePullSecrets, or,
// when it names none, its ServiceAccount's (the ServiceAccount admission
// plugin copies those into a pod only when the pod has none), as the
// kubelet builds it (credentialprovidersecrets.MakeDockerKeyring; the
// node's own credentials, a config.json or a credential provider plugin,
// are not seen).
func (c *credentials) keyring(ctx context.Context, u Use) (credentialprovider.DockerKeyring, string, error) {
	names := append([]string(nil), u.PullSecrets...)
	if len(names) == 0 {
		sa, problem, err := c.serviceAccount(ctx, u.Namespace, u.ServiceAccount)
		if err != nil || problem != "" {
			return nil, problem, err
		}
		if sa != nil {
			for _, ref := range sa.ImagePullSecrets {
				names = append(names, ref.Name)
			}
		}
	}
	var secrets []corev1.Secret
	for _, name := range names {
		if o, ok := c.rendered["Secret "+u.Namespace+"/"+name]; ok {
			if s, ok := podSecret(o); ok {
				secrets = append(secrets, *s)
			}
			continue
		}
		s, err := c.kube.CoreV1().Secrets(u.Namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // the kubelet pulls without it
		case apierrors.IsForbidden(err):
			return nil, fmt.Sprintf("image check: may not get secret %s/%s, a pull secret of %s: grant get on secrets named %s in %s (plan --check-chart derives it), "+
				"or set images.check: false in the spec", u.Namespace, name, u.Where, name, u.Namespace), nil
		case err != nil:
			return nil, "", fmt.Errorf("reading pull secret %s/%s of %s: %w", u.Namespace, name, u.Where, err)
		}
		secrets = append(secrets, *s)
	}
	kr, err := credentialprovidersecrets.MakeDockerKeyring(secrets, &credentialprovider.BasicDockerKeyring{})
	if err != nil {
		return nil, fmt.Sprintf("image check: the pull secrets of %s do not read as the kubelet reads them: %v", u.Where, err), nil
	}
	return kr, "", nil
}

// serviceAccount is the ServiceAccount a pod runs as: the render's, else
// the cluster's; nil when neither has it.
func (c *credentials) serviceAccount(ctx context.Context, ns, name string) (*corev1.ServiceAccount, string, error) {
	if o, ok := c.rendered["ServiceAccount "+ns+"/"+name]; ok {
		var sa corev1.ServiceAccount
		if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &sa) == nil {
			return &sa, "", nil
		}
	}
	sa, err := c.kube.CoreV1().ServiceAccounts(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, "", nil
	case apierrors.IsForbidden(err):
		return nil, fmt.Sprintf("image check: may not get serviceaccount %s/%s, whose imagePullSecrets its pods pull with: grant get on serviceaccounts named %s in %s "+
			"(plan --check-chart derives it), or set images.check: false in the spec", ns, name, name, ns), nil
	case err != nil:
		return nil, "", fmt.Errorf("reading serviceaccount %s/%s: %w", ns, name, err)
	}
	return sa, "", nil
}

// indexed are a render's objects by "Kind namespace/name".
func indexed(objs []*unstructured.Unstructured, releaseNamespace string) map[string]*unstructured.Unstructured {
	out := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		ns := o.GetNamespace()
		if ns == "" {
			ns = releaseNamespace
		}
		out[o.GetKind()+" "+ns+"/"+o.GetName()] = o
	}
	return out
}
