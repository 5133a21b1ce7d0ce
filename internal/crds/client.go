package crds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/csaupgrade"

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

// apply is the server-side apply of crd as manager; a dry run with
// dryRun. Only a dry run forces (the server's verdict on a CRD whose
// installer's fields the apply hands over first).
func (c *Client) apply(ctx context.Context, crd CRD, manager string, force, dryRun bool) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(crd.Object.Object)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: manager, FieldValidation: "Strict"}
	if force {
		opts.Force = &force
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return c.Dynamic.Resource(GVR).Patch(ctx, crd.Name(), types.ApplyPatchType, data, opts)
}

// conflictRE is a manager in the API server's words of a field-manager
// conflict: `conflict with "helm" using apiextensions.k8s.io/v1`.
var conflictRE = regexp.MustCompile(`conflicts? with "([^"]+)"`)

// conflictManagers are the managers a conflict error names.
func conflictManagers(err error) []string {
	var out []string
	var status apierrors.APIStatus
	if !errors.As(err, &status) || status.Status().Details == nil {
		return nil
	}
	for _, cause := range status.Status().Details.Causes {
		if m := conflictRE.FindStringSubmatch(cause.Message); m != nil && !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

func subset(some, of []string) bool {
	for _, s := range some {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

// handOver hands the client-side (Update) fields of the installers d
// names over to d's manager, as Helm 4 hands its own over (csaupgrade):
// one JSON patch of managedFields, conditional on the resourceVersion
// read. Nothing when d names none or nothing is left to hand over.
func (c *Client) handOver(ctx context.Context, crd CRD, d Decision) error {
	if len(d.Handover) == 0 {
		return nil
	}
	live, err := c.Dynamic.Resource(GVR).Get(ctx, crd.Name(), metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading CustomResourceDefinition %s: %w", crd.Name(), err)
	}
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(d.Handover...), d.Manager)
	if err != nil || patch == nil {
		return err
	}
	if _, err := c.Dynamic.Resource(GVR).Patch(ctx, crd.Name(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: d.Manager}); err != nil {
		return fmt.Errorf("handing the client-side fields of %s on CustomResourceDefinition %s over to %s: %w", strings.Join(d.Handover, ", "), crd.Name(), d.Manager, err)
	}
	c.log().Info("CRD fields handed over", "crd", crd.Name(), "from", strings.Join(d.Handover, ", "), "to", d.Manager)
	return nil
}

// refusal is the API server's refusal of the apply of name, in its words,
// with the way out where there is one.
func refusal(err error, name, manager string) string {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Sprintf("%v: another field manager owns these fields of the CRD, and chart-upgrader never forces a CRD: "+
			"when that manager's values are to go, hand its fields over once by hand (kubectl apply --server-side --force-conflicts --field-manager=%s -f the chart's file), "+
			"or make the chart's values the other manager's", err, manager)
	case apierrors.IsForbidden(err):
		return forbidden(err, "patch", name)
	}
	return err.Error()
}

// forbidden is a refusal of verb on the CRD name, naming the rule.
func forbidden(err error, verb, name string) string {
	return fmt.Sprintf("%v: the process may not %s it: grant %s (and create) on customresourcedefinitions, resourceNames [%s] "+
		"(plan --check-chart with --check-crds derives the rules)", err, verb, verb, name)
}

// objects counts live's objects at its storage version, naming the first
// few (namespace/name).
func (c *Client) objects(ctx context.Context, live *apiextv1.CustomResourceDefinition) (Objects, error) {
	v := storage(live)
	for _, ver := range live.Spec.Versions { // a served one to list at
		if ver.Served {
			v = ver.Name
			if ver.Storage {
				break
			}
		}
	}
	gvr := schema.GroupVersionResource{Group: live.Spec.Group, Version: v, Resource: live.Spec.Names.Plural}
	var o Objects
	err := c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		o.Count++
		if len(o.First) < firstNamed {
			o.First = append(o.First, objectName(item))
		}
		return nil
	})
	return o, err
}

// eachObject calls fn with each object of gvr, in all namespaces, read
// in pages of 500; it stops at fn's first error.
func (c *Client) eachObject(ctx context.Context, gvr schema.GroupVersionResource, fn func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := c.Dynamic.Resource(gvr).List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range list.Items {
			if err := fn(&list.Items[i]); err != nil {
				return err
			}
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// Apply applies the CRDs of cs that ds (Check's verdicts, in the same
// order) create or replace, and waits until each is Established. It
// applies nothing when any verdict is a refusal. It returns the verdicts
// it carried out.
func (c *Client) Apply(ctx context.Context, cs []CRD, ds []Decision) ([]Decision, error) {
	if len(cs) != len(ds) {
		return nil, fmt.Errorf("applying CRDs: %d verdicts for %d CRDs", len(ds), len(cs))
	}
	for _, d := range ds {
		if d.Action == ActionRefused {
			return nil, fmt.Errorf("applying CRDs: %s", d.Refused[0])
		}
	}
	applied := make([]bool, len(cs))
	var g errgroup.Group
	g.SetLimit(parallel)
	for i, crd := range cs {
		if a := ds[i].Action; a != ActionCreate && a != ActionReplace && a != ActionMigrate {
			continue
		}
		g.Go(func() error {
			if err := c.handOver(ctx, crd, ds[i]); err != nil {
				return err
			}
			if ds[i].Action == ActionMigrate {
				if err := c.migrate(ctx, crd, ds[i]); err != nil {
					return fmt.Errorf("migrating CustomResourceDefinition %s (%s): %w", crd.Name(), crd.From, err)
				}
			}
			if _, err := c.apply(ctx, crd, ds[i].Manager, false, false); err != nil {
				return fmt.Errorf("applying CustomResourceDefinition %s (%s): %s", crd.Name(), crd.From, refusal(err, crd.Name(), ds[i].Manager))
			}
			applied[i] = true
			return c.ready(ctx, crd)
		})
	}
	err := g.Wait()
	var done []Decision
	for i, d := range ds {
		if applied[i] {
			done = append(done, d)
		}
	}
	if len(done) > 0 && c.Applied != nil {
		c.Applied()
	}
	return done, err
}

// ready waits until crd is Established and the API server answers at
// each version crd serves: an update that adds a version finds the CRD
// Established already, while the API server's handler of the new version
// may not answer yet (404 for a moment).
func (c *Client) ready(ctx context.Context, crd CRD) error {
	if err := c.established(ctx, crd.Name()); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, EstablishTimeout)
	defer cancel()
	for _, v := range crd.Typed.Spec.Versions {
		if !v.Served {
			continue
		}
		gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: v.Name, Resource: crd.Typed.Spec.Names.Plural}
		for delay := 10 * time.Millisecond; ; delay = min(2*delay, time.Second) {
			_, err := c.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
			if err == nil || !apierrors.IsNotFound(err) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("CustomResourceDefinition %s is Established, but the API server does not serve %s after %s", crd.Name(), gvr.GroupVersion(), EstablishTimeout)
			case <-time.After(delay):
			}
		}
	}
	return nil
}

// established waits until the CRD name is Established (its names
// accepted and its kind served), watching it.
func (c *Client) established(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, EstablishTimeout)
	defer cancel()
	beat := c.Heartbeat
	if beat <= 0 {
		beat = 10 * time.Second
	}
	start := time.Now()
	ticker := time.NewTicker(beat)
	defer ticker.Stop()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	for {
		list, err := c.Dynamic.Resource(GVR).List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinition %s to be Established: %w", name, err)
		}
		if len(list.Items) == 1 && isEstablished(&list.Items[0]) {
			return nil
		}
		w, err := c.Dynamic.Resource(GVR).Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.GetResourceVersion()})
		if err != nil {
			return fmt.Errorf("waiting for CustomResourceDefinition %s to be Established: %w", name, err)
		}
		ok, err := c.watchEstablished(ctx, w, ticker, start, name)
		w.Stop()
		if ok || err != nil {
			return err
		}
	}
}

// watchEstablished follows w until the CRD is Established (true), the
// watch ends (false: list again) or ctx does.
func (c *Client) watchEstablished(ctx context.Context, w watch.Interface, ticker *time.Ticker, start time.Time, name string) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("CustomResourceDefinition %s is not Established after %s: see its status.conditions", name, time.Since(start).Round(time.Second))
		case <-ticker.C:
			c.log().Info("waiting for the CRD to be Established", "crd", name, "waited", time.Since(start).Round(time.Second).String())
		case ev, open := <-w.ResultChan():
			if !open {
				return false, nil
			}
			if u, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error && isEstablished(u) {
				return true, nil
			}
		}
	}
}

// isEstablished reads the Established condition.
func isEstablished(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == string(apiextv1.Established) && m["status"] == string(apiextv1.ConditionTrue) {
			return true
		}
	}
	return false
}

func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Log
}

// intermediate is crd with the versions live stores objects at that crd
// drops or stops serving put back, served and not the storage version:
// what a migration applies first, so that every object stays readable
// while it is written back at crd's storage version. ok is false when
// nothing is to be put back.
func intermediate(crd CRD, live *apiextv1.CustomResourceDefinition) (CRD, bool) {
	typed := crd.Typed.DeepCopy()
	changed := false
	for _, v := range live.Status.StoredVersions {
		switch now := version(typed, v); {
		case now == nil:
			was := version(live, v)
			if was == nil {
				continue
			}
			back := *was.DeepCopy()
			back.Served, back.Storage = true, false
			typed.Spec.Versions = append(typed.Spec.Versions, back)
			changed = true
		case !now.Served:
			now.Served = true
			changed = true
		}
	}
	if !changed {
		return crd, false
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed)
	if err != nil {
		return crd, false
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return CRD{From: crd.From, Object: u, Typed: typed}, true
}

// migrate moves the objects of crd off the versions d.Migrate names, as
// kube-storage-version-migrator and clusterctl do: it applies the
// intermediate CRD (the old versions kept and served, the new storage
// version), writes every object back unchanged (the API server stores it
// at the new storage version), then trims status.storedVersions to that
// version. Each step may be repeated: a run killed in the middle
// converges when run again.
func (c *Client) migrate(ctx context.Context, crd CRD, d Decision) error {
	u, err := c.Dynamic.Resource(GVR).Get(ctx, crd.Name(), metav1.GetOptions{})
	if err != nil {
		return err
	}
	live := &apiextv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, live); err != nil {
		return err
	}
	if inter, ok := intermediate(crd, live); ok {
		if _, err := c.apply(ctx, inter, d.Manager, false, false); err != nil {
			return fmt.Errorf("applying it with %s kept: %s", strings.Join(d.Migrate, ", "), refusal(err, crd.Name(), d.Manager))
		}
		if err := c.ready(ctx, inter); err != nil {
			return err
		}
	}
	to := storage(crd.Typed)
	gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: to, Resource: crd.Typed.Spec.Names.Plural}
	start, last := time.Now(), time.Now()
	done := 0
	err = c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		if err := c.writeBack(ctx, gvr, item); err != nil {
			return err
		}
		done++
		if c.Progress != nil {
			c.Progress(crd.Name(), done)
		}
		if time.Since(last) >= 2*time.Second {
			c.log().Info("migrating the CRD's objects", "crd", crd.Name(), "to", to, "written", done, "elapsed", time.Since(start).Round(time.Second).String())
			last = time.Now()
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("writing its objects back at %s: %w", to, err)
	}
	c.log().Info("the CRD's objects migrated", "crd", crd.Name(), "to", to, "written", done, "elapsed", time.Since(start).Round(time.Millisecond).String())
	return c.trimStored(ctx, crd.Name(), to)
}

// writeBack writes obj back as it is, once more after a conflict with
// the object read again; an object deleted meanwhile needs nothing.
func (c *Client) writeBack(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
	ri := c.Dynamic.Resource(gvr).Namespace(obj.GetNamespace())
	for attempt := 0; ; attempt++ {
		_, err := ri.Update(ctx, obj, metav1.UpdateOptions{FieldManager: Manager})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err) && attempt < 3:
			if obj, err = ri.Get(ctx, obj.GetName(), metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return nil
			} else if err != nil {
				return err
			}
		default:
			return fmt.Errorf("writing back %s: %w", objectName(obj), err)
		}
	}
}

// trimStored sets the CRD's status.storedVersions to to alone: every
// object is stored there now.
func (c *Client) trimStored(ctx context.Context, name, to string) error {
	u, err := c.Dynamic.Resource(GVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if stored, _, _ := unstructured.NestedStringSlice(u.Object, "status", "storedVersions"); slices.Equal(stored, []string{to}) {
		return nil
	}
	if err := unstructured.SetNestedStringSlice(u.Object, []string{to}, "status", "storedVersions"); err != nil {
		return err
	}
	if _, err := c.Dynamic.Resource(GVR).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: Manager}); err != nil {
		return fmt.Errorf("trimming status.storedVersions to [%s]: %w", to, err)
	}
	c.log().Info("CRD status.storedVersions trimmed", "crd", name, "to", to)
	return nil
}

// pruned reads the objects of live at a version both live and crd serve
// (crd's storage version when it can) and types each by crd's schema of
// that version as the API server's pruning does: the fields it would drop
// on the object's next write, counted and the first few named. Nothing
// when no version is served by both, or crd keeps unknown fields.
func (c *Client) pruned(ctx context.Context, crd CRD, live *apiextv1.CustomResourceDefinition) (Pruned, string, error) {
	var at *apiextv1.CustomResourceDefinitionVersion
	for i := range crd.Typed.Spec.Versions {
		v := &crd.Typed.Spec.Versions[i]
		if was := version(live, v.Name); v.Served && was != nil && was.Served && (at == nil || v.Storage) {
			at = v
		}
	}
	if at == nil || at.Schema == nil || at.Schema.OpenAPIV3Schema == nil || crd.Typed.Spec.PreserveUnknownFields {
		return Pruned{}, "", nil
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(at.Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return Pruned{}, "", err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return Pruned{}, "", fmt.Errorf("the new schema at %s: %w", at.Name, err)
	}
	gvr := schema.GroupVersionResource{Group: crd.Typed.Spec.Group, Version: at.Name, Resource: crd.Typed.Spec.Names.Plural}
	var out Pruned
	err = c.eachObject(ctx, gvr, func(item *unstructured.Unstructured) error {
		paths := pruning.PruneWithOptions(item.DeepCopy().Object, s, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if len(paths) == 0 {
			return nil
		}
		out.Count++
		if len(out.First) < firstNamed {
			for i := range paths {
				paths[i] = "." + paths[i]
			}
			out.First = append(out.First, fmt.Sprintf("%s %s: %s", item.GetKind(), objectName(item), strings.Join(paths, ", ")))
		}
		return nil
	})
	if err != nil {
		return Pruned{}, "", err
	}
	return out, at.Name, nil
}
