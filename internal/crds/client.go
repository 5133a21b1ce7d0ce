package crds

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"time"

	"golang.org/x/sync/errgroup"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/chart-upgrader/chart-upgrader/internal/applycheck"
)

// GVR is the resource of CustomResourceDefinitions.
var GVR = apiextv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// Manager is the field manager chart-upgrader applies a CRD as when no
// manager applied it server-side before (applyManager): its own, so that
// a field another manager owns is a conflict, never taken.
const Manager = "chart-upgrader"

// applyManager is the manager to apply live as: the one that holds its
// largest Apply entry (the Helm or Fleet agent that installed it
// server-side), so that the upgrade carries that ownership on as the
// chart's own and a field the chart drops is dropped; else Manager.
func applyManager(live *unstructured.Unstructured) string {
	if m := applycheck.ApplyManager(live); m != "" {
		return m
	}
	return Manager
}

// EstablishTimeout bounds the wait for an applied CRD to be Established
// (Helm's install waits as long).
const EstablishTimeout = 60 * time.Second

// firstNamed is how many objects a refusal or a warning names.
const firstNamed = 3

// Client reads, judges and applies a chart's CRDs.
type Client struct {
	Dynamic dynamic.Interface
	Kube    kubernetes.Interface
	Log     *slog.Logger
	// Heartbeat is how often the wait for Established says what it waits
	// for (0: every 10 s).
	Heartbeat time.Duration
	// Installers are the field managers that install a chart's crds/
	// client-side (Helm 3 and klipper-helm: "helm"): a conflict with
	// their Update entries is the chart's own fields, handed over to the
	// applying manager before the apply (csaupgrade, as Helm 4 hands its
	// own client-side fields over), never a refusal. A conflict with any
	// other manager is refused.
	Installers []string
	// Migrate: a stored version the new CRD drops or stops serving is
	// migrated (every object written back at the new storage version,
	// status.storedVersions trimmed) before the update, not refused.
	Migrate bool
	// Progress, when set, is told how many objects of a CRD a migration
	// has written back, after each one.
	Progress func(crd string, done int)
	// Applied, when set, is called once CRDs were applied and are
	// Established: the process's discovery must learn their kinds (a
	// RESTMapper's Reset).
	Applied func()
}

// Check judges each CRD of cs under p (Judge), reading what the verdict
// needs: the cluster's CRD, the API server's dry-run apply of the
// chart's (createReplace, or a create), the objects of a version that
// would no longer be served, the conversion webhook's Service. It writes
// nothing. An answer the process may not read is a refusal naming the
// rule.
func (c *Client) Check(ctx context.Context, p Policy, cs []CRD) ([]Decision, error) {
	out := make([]Decision, len(cs))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, crd := range cs {
		g.Go(func() error {
			l, err := c.live(ctx, p, crd)
			if err != nil {
				return err
			}
			d := Judge(p, c.Migrate, crd, l)
			d.Manager, d.Handover, d.was = l.manager, l.handover, l.was
			out[i] = d
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// parallel is how many CRDs are read, checked or applied at once: each
// is a few round trips, mostly waiting for the API server.
const parallel = 8

// live reads what Judge needs of crd.
func (c *Client) live(ctx context.Context, p Policy, crd CRD) (Live, error) {
	l := Live{manager: Manager}
	u, err := c.Dynamic.Resource(GVR).Get(ctx, crd.Name(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		return Live{Unread: true, Refusal: forbidden(err, "get", crd.Name())}, nil
	case err != nil:
		return l, fmt.Errorf("reading CustomResourceDefinition %s: %w", crd.Name(), err)
	default:
		l.manager, l.was = applyManager(u), u
		l.CRD = &apiextv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, l.CRD); err != nil {
			return l, fmt.Errorf("decoding CustomResourceDefinition %s: %w", crd.Name(), err)
		}
	}
	if l.CRD != nil && p != CreateReplace { // the cluster's stays: nothing to ask
		l.Differs = true
		return l, nil
	}
	judged, migrating := crd, false // the server judges what the apply writes first
	if c.Migrate && l.CRD != nil {
		judged, migrating = intermediate(crd, l.CRD)
	}
	after, err := c.apply(ctx, judged, l.manager, false, true)
	if apierrors.IsConflict(err) && l.CRD != nil {
		if owners := conflictManagers(err); len(owners) > 0 && subset(owners, c.Installers) {
			l.handover = owners
			after, err = c.apply(ctx, judged, l.manager, true, true) // the server's verdict once they are handed over
		}
	}
	if err != nil {
		l.Differs, l.Refusal = true, refusal(err, crd.Name(), l.manager)
		return l, nil
	}
	if l.CRD == nil {
		return l, nil
	}
	// a migration still to finish (a stored version the chart drops)
	// differs, whatever the dry run of its first step says
	l.Differs = migrating || changes(u, after)
	if !l.Differs {
		return l, nil
	}
	if l.Pruned, l.PrunedAt, err = c.pruned(ctx, crd, l.CRD); err != nil {
		l.Refusal = fmt.Sprintf("reading its objects for the fields the new schema drops: %v", err)
		return l, nil
	}
	if len(Unserving(crd, l.CRD)) > 0 {
		if l.Objects, err = c.objects(ctx, l.CRD); err != nil {
			l.Refusal = fmt.Sprintf("counting its objects: %v", err)
			return l, nil
		}
	}
	if conv := crd.Typed.Spec.Conversion; conv != nil && conv.Strategy == apiextv1.WebhookConverter &&
		conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
		s := conv.Webhook.ClientConfig.Service
		_, err := c.Kube.CoreV1().Services(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l.MissingService = s.Namespace + "/" + s.Name
		case err != nil:
			l.Refusal = fmt.Sprintf("reading its conversion webhook's Service %s/%s: %v", s.Namespace, s.Name, err)
		}
	}
	return l, nil
}

// changes reports whether after (the dry-run apply) differs from before
// in what the chart writes: the spec, labels and annotations.
func changes(before, after *unstructured.Unstructured) bool {
	return !reflect.DeepEqual(before.Object["spec"], after.Object["spec"]) ||
		!reflect.DeepEqual(before.GetLabels(), after.GetLabels()) ||
		!reflect.DeepEqual(before.GetAnnotations(), after.GetAnnotations())
}

func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}
