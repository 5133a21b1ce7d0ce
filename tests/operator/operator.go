// Package operator is a small operator of the tests' own, for the health
// gates (wait.health): as KubeVirt's or Longhorn's operators do after a
// chart is applied, it moves the status of the custom resources a chart
// renders and makes objects of its own, by label, after a delay.
//
// It watches the Widgets (gates.example.com/v1) of one namespace. For a
// Widget whose status is older than its generation it waits Delay, then
// writes its status: phase Deployed (Failed when spec.fail is true),
// observedGeneration and spec.version; then it waits Delay again and
// makes (or updates) Parts WidgetParts labelled example.com/part=true,
// each at the Widget's spec.version, their status state running. The
// time of every write is kept, so that a test can say what ended a wait.
// The Widget and WidgetPart CRDs are CRDs (the chart's crds/).
package operator

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// The operator's kinds.
var (
	WidgetGVR = schema.GroupVersionResource{Group: "gates.example.com", Version: "v1", Resource: "widgets"}
	PartGVR   = schema.GroupVersionResource{Group: "gates.example.com", Version: "v1", Resource: "widgetparts"}
)

// PartLabel selects the Parts the operator makes.
const PartLabel = "example.com/part"

// CRDs are the two CRDs, for a chart's crds/ folder.
const CRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.gates.example.com}
spec:
  group: gates.example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgetparts.gates.example.com}
spec:
  group: gates.example.com
  scope: Namespaced
  names: {plural: widgetparts, singular: widgetpart, kind: WidgetPart, listKind: WidgetPartList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// WidgetTemplate is the chart's Widget, <release>-w, at the chart's
// version (.Values.widgetVersion when set: a chart whose Widget's spec
// stays as it was); spec.fail from .Values.fail.
const WidgetTemplate = `apiVersion: gates.example.com/v1
kind: Widget
metadata:
  name: {{ .Release.Name }}-w
spec:
  version: {{ .Values.widgetVersion | default .Chart.Version | quote }}
  fail: {{ .Values.fail | default false }}
`

// Write is one write of the operator.
type Write struct {
	At   time.Time
	What string // "Widget ns/name Deployed 2.0.0", "WidgetPart ns/name running 2.0.0"
}

// Operator acts on the Widgets of one namespace.
type Operator struct {
	Dynamic   dynamic.Interface
	Namespace string
	Delay     time.Duration
	Parts     int

	mu      sync.Mutex
	hold    bool             // hold the Parts back
	pending map[string]int64 // widget → generation scheduled
	writes  []Write
	wrote   chan struct{}
	inf     cache.SharedIndexInformer
	ctx     context.Context
}

// Start runs the operator until ctx ends; it returns once it has listed
// the Widgets.
func (o *Operator) Start(ctx context.Context) error {
	o.ctx, o.pending, o.wrote = ctx, map[string]int64{}, make(chan struct{}, 1)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(o.Dynamic, 0, o.Namespace, nil)
	o.inf = f.ForResource(WidgetGVR).Informer()
	if _, err := o.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.seen(obj) },
		UpdateFunc: func(_, obj any) { o.seen(obj) },
	}); err != nil {
		return err
	}
	go o.inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), o.inf.HasSynced) {
		return fmt.Errorf("listing widgets: %w", ctx.Err())
	}
	return nil
}

// HoldParts keeps the operator from writing Parts (a Widget's status it
// still writes): what an operator whose rollout is stuck leaves.
func (o *Operator) HoldParts() {
	o.mu.Lock()
	o.hold = true
	o.mu.Unlock()
}

// ReleaseParts writes again, at once, the Parts of every Widget at its
// version.
func (o *Operator) ReleaseParts() {
	o.mu.Lock()
	o.hold = false
	o.mu.Unlock()
	for _, obj := range o.inf.GetStore().List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			version, _, _ := unstructured.NestedString(u.Object, "spec", "version")
			o.parts(u.GetName(), version)
		}
	}
}

// Writes are the operator's writes so far, oldest first.
func (o *Operator) Writes() []Write {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Write(nil), o.writes...)
}

// Wrote receives a value after each write.
func (o *Operator) Wrote() <-chan struct{} { return o.wrote }

func (o *Operator) seen(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	if observed >= u.GetGeneration() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.pending[u.GetName()] >= u.GetGeneration() {
		return
	}
	o.pending[u.GetName()] = u.GetGeneration()
	name := u.GetName()
	time.AfterFunc(o.Delay, func() { o.reconcile(name) })
}

// reconcile writes the Widget's status, then, after Delay, its Parts.
func (o *Operator) reconcile(name string) {
	ri := o.Dynamic.Resource(WidgetGVR).Namespace(o.Namespace)
	u, err := ri.Get(o.ctx, name, metav1.GetOptions{})
	if err != nil {
		return
	}
	version, _, _ := unstructured.NestedString(u.Object, "spec", "version")
	fail, _, _ := unstructured.NestedBool(u.Object, "spec", "fail")
	phase := "Deployed"
	if fail {
		phase = "Failed"
	}
	u.Object["status"] = map[string]any{"phase": phase, "observedGeneration": u.GetGeneration(), "version": version}
	if _, err := ri.UpdateStatus(o.ctx, u, metav1.UpdateOptions{}); err != nil {
		o.mu.Lock()
		delete(o.pending, name) // the next event tries again
		o.mu.Unlock()
		return
	}
	o.record(fmt.Sprintf("Widget %s/%s %s %s", o.Namespace, name, phase, version))
	if fail {
		return
	}
	time.AfterFunc(o.Delay, func() { o.parts(name, version) })
}

// parts writes the Parts of widget at version, unless they are held.
func (o *Operator) parts(widget, version string) {
	o.mu.Lock()
	hold := o.hold
	o.mu.Unlock()
	if hold {
		return
	}
	for i := range o.Parts {
		if err := o.part(fmt.Sprintf("%s-part-%d", widget, i), widget, version); err != nil {
			return
		}
	}
}

// part makes or updates one Part at version, running.
func (o *Operator) part(name, widget, version string) error {
	ri := o.Dynamic.Resource(PartGVR).Namespace(o.Namespace)
	u, err := ri.Get(o.ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		u = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "gates.example.com/v1", "kind": "WidgetPart",
			"metadata": map[string]any{"name": name, "namespace": o.Namespace, "labels": map[string]any{PartLabel: "true", "example.com/widget": widget}}}}
		if u, err = ri.Create(o.ctx, u, metav1.CreateOptions{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	u.Object["spec"] = map[string]any{"version": version}
	if u, err = ri.Update(o.ctx, u, metav1.UpdateOptions{}); err != nil {
		return err
	}
	u.Object["status"] = map[string]any{"state": "running", "observedGeneration": u.GetGeneration()}
	if _, err := ri.UpdateStatus(o.ctx, u, metav1.UpdateOptions{}); err != nil {
		return err
	}
	o.record(fmt.Sprintf("WidgetPart %s/%s running %s", o.Namespace, name, version))
	return nil
}

func (o *Operator) record(what string) {
	o.mu.Lock()
	o.writes = append(o.writes, Write{At: time.Now(), What: what})
	o.mu.Unlock()
	select {
	case o.wrote <- struct{}{}:
	default:
	}
}
