package upgrade

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/health"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Ref names a target: its kind (lower case, as in --target), namespace and
// name.
type Ref struct{ Kind, Namespace, Name string }

// String is the --target form: managedchart/fleet-local/harvester.
func (r Ref) String() string { return r.Kind + "/" + r.Namespace + "/" + r.Name }

// Want is what an apply wrote: readiness is judged against it, so status
// written before the apply never counts.
type Want struct {
	Version    string
	ValuesHash string
}

// Record is what chart-upgrader wrote on a target when it applied: the
// cluster-wide record every later run on any node reads.
type Record struct {
	Version         string
	ValuesHash      string
	AppliedAt       string
	PreviousVersion string
}

// Want is the version and values hash the record says were applied; ok is
// false when the target carries no complete record.
func (r Record) Want() (Want, bool) {
	w := Want{Version: r.Version, ValuesHash: r.ValuesHash}
	return w, w.Version != "" && w.ValuesHash != ""
}

// Observed is one read of a target.
type Observed struct {
	Chart      string         // the chart it deploys (the default chart name in the source)
	Version    string         // the chart version it declares
	Values     map[string]any // U: the user values it holds
	ValuesHash string         // values.Hash of Values
	Paused     bool
	PausedByUs bool   // paused by chart-upgrader itself (its annotation says so)
	Applied    Record // what chart-upgrader recorded on it
	UID        string // for Events
	// Overlay holds values the target's controller lays over the user
	// values, from an object the user owns and chart-upgrader never writes
	// (a k3s HelmChartConfig); OverlayFrom names it. The merge checks the
	// chart with both and reports every value the overlay shadows.
	Overlay     map[string]any
	OverlayFrom string

	// Source is the adapter's own copy of what it read (for an optimistic
	// write); the core never looks inside.
	Source any
}

// AppliedHere reports whether the target carries chart-upgrader's apply of
// version, with the values that apply wrote still in place.
func (o *Observed) AppliedHere(version string) bool {
	w, ok := o.Applied.Want()
	return ok && w.Version == version && o.Version == version && w.ValuesHash == o.ValuesHash
}

// Change is the one write of an apply.
type Change struct {
	Version string
	// Chart is the chart of Version, for a target that carries the chart
	// itself (a HelmChart's spec.chartContent); nil with Restore.
	Chart  *Chart
	Values map[string]any // the merged values U'; ignored with Restore
	// Restore, for a rollback, puts back the whole backed-up target.
	Restore *Backup
	Record  Record // recorded on the target with the write
	// CRDs are the CustomResourceDefinitions of the chart's crds/ the
	// apply creates or replaces before this write (CRDCheck.Objects), for
	// the conflict check: the kinds they define and their schemas.
	CRDs []map[string]any
}

// Backup is a target as it was before an upgrade.
type Backup struct {
	Name       string // where it is kept, for people
	Version    string
	ValuesHash string
	// Data is the adapter's own copy of what it saved.
	Data any
}

// ErrConflict wraps the error of an Apply that lost an optimistic write:
// the target changed since it was read.
var ErrConflict = errors.New("the target changed since it was read")

// Target is the port to one target of some kind. Every read is fresh; the
// core decides what to do with it.
type Target interface {
	// Ref names the target.
	Ref() Ref
	// Read reads the target; nil (and no error) when it does not exist.
	Read(ctx context.Context) (*Observed, error)
	// Health says what makes the target unfit for an upgrade now.
	Health(ctx context.Context, o *Observed) (Health, error)
	// Apply makes one write with optimistic concurrency; a target changed
	// since o was read fails it with an error wrapping ErrConflict.
	Apply(ctx context.Context, o *Observed, c Change) (*Observed, error)
	// Backup saves the target as o shows it, once: an existing backup of
	// the same version is left as it is. created says whether this call
	// wrote it.
	Backup(ctx context.Context, o *Observed) (name string, created bool, err error)
	// ReadBackup reads the backup taken before the upgrade from
	// fromVersion; the newest when fromVersion is empty.
	ReadBackup(ctx context.Context, fromVersion string) (*Backup, error)
	// Backups names the backups kept, for status.
	Backups(ctx context.Context) ([]string, error)
	// Look judges readiness for want once, without a watch.
	Look(ctx context.Context, o *Observed, want Want) (Readiness, error)
	// Watch starts watching the target and what its controllers make of
	// it, and returns once the first view is complete. It ends with ctx.
	Watch(ctx context.Context) (Watch, error)
}

// Reverter is a target that undoes a failed apply itself (a Helm release:
// a Helm rollback to the revision the apply started from).
type Reverter interface {
	// RevertFailed is called when the wait for want timed out or ended in
	// a failure. When the target is set to undo it, and still carries the
	// apply of want, it undoes it; it says what it did, "" when nothing.
	RevertFailed(ctx context.Context, want Want) (string, error)
}

// ConflictChecker is a target whose apply can meet field-manager
// conflicts (a server-side apply): Conflicts says, before anything is
// written, which fields of the objects c would write another manager owns.
type ConflictChecker interface {
	Conflicts(ctx context.Context, o *Observed, c Change) (Conflicts, error)
}

// Conflicts is what a conflict check found.
type Conflicts struct {
	// Refused are the conflicts that would fail the apply, one line a
	// person can act on each (object, field, owner, values, the ways out):
	// preflight refuses them.
	Refused []string
	// Warnings are fields another manager set that the apply overwrites.
	Warnings []values.Warning
	// Note says what was checked and how, for preflight's log.
	Note string
	// Changes gives, when asked, what the apply would do to each object
	// (preflight -o diff); nil when nothing was computed.
	Changes func() []ObjectChange
}

// ObjectChange is what an apply would do to one object: create, update or
// delete it, and the change as a unified diff of the object live and
// after the apply (a Secret's values redacted).
type ObjectChange struct {
	Object string `json:"object"` // Kind namespace/name
	Action string `json:"action"` // create, update, delete
	Diff   string `json:"diff"`
}

// Drifter is a target that can compare its objects live with what its
// deployed revision rendered.
type Drifter interface {
	// Drift lists the fields of the target's objects that differ live
	// from what its deployed revision rendered, or that a field manager
	// other than its applier owns, each read back in values terms against
	// deployed (the chart of the deployed version). It writes nothing.
	Drift(ctx context.Context, o *Observed, deployed *Chart) (DriftReport, error)
}

// DriftReport is what Drift found.
type DriftReport struct {
	Fields []DriftField
	// Reported are the drifts the target's controller reports itself
	// (Fleet's modified patches): a second source.
	Reported []Drift
	// Note says what was compared, for people.
	Note string
	// Unread says why nothing could be compared ("" when it was): no
	// release of the target on this cluster, say.
	Unread string
	// Missing names the objects the cluster does not have; NotChecked
	// those that could not be compared, with why.
	Missing, NotChecked []string
}

// DriftField is one drifted field of a target's object.
type DriftField struct {
	Object string `json:"object"` // Kind namespace/name
	Field  string `json:"field"`  // as the API server prints it
	// Managers own it beside or instead of the applier (name and
	// operation); Owner is the first one's bare name.
	Managers []string `json:"managers"`
	Owner    string   `json:"-"`
	// Live and Rendered are the values for people (a Secret's redacted).
	Live     string `json:"live"`
	Rendered string `json:"rendered"`
	// Differs: the live value is not the rendered one (else another
	// manager owns the field with the rendered value).
	Differs bool `json:"differs"`
	Secret  bool `json:"secret,omitempty"`
	// Reading is the field in values terms.
	Reading provenance.Reading `json:"values"`
}

// Adoptions are the values that make the chart render the drifted fields
// as they are live, for the merge's adopt rules (values.Input.Adopt).
func (r DriftReport) Adoptions() []values.Adoption {
	var out []values.Adoption
	for _, f := range r.Fields {
		if !f.Differs || !f.Reading.Adoptable() {
			continue
		}
		manager := f.Owner
		if manager == "" {
			manager = "a manager that kept no field record"
		}
		for _, a := range f.Reading.Adopt {
			out = append(out, values.Adoption{Keys: a.Keys, Value: a.Value, Object: f.Object, Field: f.Field,
				Manager: manager, Rendered: f.Rendered, Secret: f.Secret})
		}
	}
	return out
}

// Health is a target's fitness for an upgrade now.
type Health struct {
	// Problems are reasons to refuse (not ready, in error, a release
	// pending), one line a person can act on each, naming the offending
	// resources. None, and no Drift: healthy.
	Problems []string
	// Drift lists objects of the chart changed in the cluster, when that
	// is all that keeps the target from being healthy: preflight refuses
	// each one unless a live rule reads it (then the upgrade writes the
	// live value and ends the drift).
	Drift []Drift
	// Warnings are risks the upgrade goes ahead with, reported with the
	// merge's warnings; Notes are what a person should know of the
	// target's settings (logged with preflight's result).
	Warnings []values.Warning
	Notes    []string
}

// Healthy reports whether nothing keeps the target from an upgrade.
func (h Health) Healthy() bool { return len(h.Problems) == 0 && len(h.Drift) == 0 }

// Drift is one object of a chart changed in the cluster since it was
// deployed.
type Drift struct {
	Object values.ObjectRef
	Patch  string // the change, as the target's controllers show it
}

// Watch is a live view of a target.
type Watch interface {
	// Current is the target as last seen; nil when it does not exist.
	Current() *Observed
	// Readiness judges the current view for want.
	Readiness(want Want) Readiness
	// Changed receives a value after anything watched changed.
	Changed() <-chan struct{}
}

// Gates is the port to the objects a job's health gates read (the spec's
// wait.health; package health judges them). Each method answers per gate,
// in the order of Job.Health.
type Gates interface {
	// Check says, before any write, what makes a gate unusable on this
	// target: a kind the cluster does not serve (nor c.CRDs define), a
	// gate on the release's objects of a kind c's chart renders none of,
	// a target whose release is not on this cluster. Its error is bad
	// input (exit 2).
	Check(ctx context.Context, o *Observed, c Change) error
	// Read reads each gate's objects once, for want.
	Read(ctx context.Context, o *Observed, want Want) ([]health.Seen, error)
	// Watch starts watching each gate's objects and returns once the
	// first view is complete. It ends with ctx.
	Watch(ctx context.Context, o *Observed) (GateWatch, error)
}

// GateWatch is a live view of the gates' objects.
type GateWatch interface {
	// Seen is each gate's objects as last seen, for want (o: the target
	// as last seen).
	Seen(o *Observed, want Want) []health.Seen
	// Changed receives a value after any of them changed.
	Changed() <-chan struct{}
}

// Pods is the port to the pods of what an upgrade applied (docs/design.md
// §7, "Pods that cannot start"): those of the new revision of the
// target's release on this cluster. A job without one judges no pod.
type Pods interface {
	// Watch starts watching the pods of the release o deploys, once it is
	// at want's version, and returns once the first view is complete; nil
	// (no error) when its pods cannot be seen from here (a ManagedChart
	// whose Bundle targets other clusters: Fleet's reports speak for
	// them). It ends with ctx.
	Watch(ctx context.Context, o *Observed, want Want) (PodWatch, error)
}

// PodWatch is a live view of the new revision's pods.
type PodWatch interface {
	// Failing are the new revision's containers that cannot start now,
	// in a stable order.
	Failing() []PodFailure
	// Changed receives a value after a pod changed.
	Changed() <-chan struct{}
	// Podless: the new revision is known to make no pod (none of its
	// objects or hooks makes pods): no container of it can crash, so
	// there is nothing to settle.
	Podless() bool
}

// PodFailure is one container of a pod of the new revision that cannot
// start, in the kubelet's words.
type PodFailure struct {
	Pod       string `json:"pod"`       // namespace/name
	Workload  string `json:"workload"`  // Kind namespace/name of the chart's object that made it
	Container string `json:"container"` // "init container NAME" or "container NAME"
	Image     string `json:"image"`
	// Reason is the kubelet's waiting reason (ImagePullBackOff,
	// CrashLoopBackOff, …) and Message its message.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Restarts, and the last termination's exit code and message (a
	// crash loop's), when it has one.
	Restarts    int32  `json:"restarts,omitempty"`
	LastExit    *int32 `json:"lastExitCode,omitempty"`
	LastMessage string `json:"lastMessage,omitempty"`
	// Crashed: the container exited non-zero and the kubelet restarts it
	// (waiting in CrashLoopBackOff, terminated with an error, or running
	// again after one). Running: it runs again now, after such an exit
	// (the kubelet's status between two back-offs, Ready when it has no
	// readiness probe): it is failing only while its restart count keeps
	// rising within the grace, which the wait's clock judges.
	Crashed bool `json:"crashed,omitempty"`
	Running bool `json:"running,omitempty"`
}

// Key tells one container's failure from another's.
func (f PodFailure) Key() string { return f.Pod + "/" + f.Container }

// String is the failure in one line: the pod, container, image, reason
// and message, and a crash loop's last exit.
func (f PodFailure) String() string {
	s := fmt.Sprintf("pod %s (%s), %s, image %s: %s", f.Pod, f.Workload, f.Container, f.Image, f.Reason)
	if f.Message != "" {
		s += ": " + f.Message
	}
	if f.LastExit != nil {
		s += fmt.Sprintf("; last exit code %d after %d restarts", *f.LastExit, f.Restarts)
		if f.LastMessage != "" {
			s += ": " + f.LastMessage
		}
	}
	return s
}

// Images is the port to the registries the nodes pull an upgrade's
// images from (docs/design.md §7, "Images"). A job without one checks no
// image (--skip-image-check, images.check: false).
type Images interface {
	// Check asks, before any write, for every image c's objects and hooks
	// run (and the images the values name for operators), where the nodes
	// the pods may run on would pull it from, whether it is there for
	// their platform. It writes nothing.
	Check(ctx context.Context, o *Observed, c Change) (ImageCheck, error)
}

// ImageCheck is the verdict on an upgrade's images.
type ImageCheck struct {
	// Checked: the images were asked for (else Note says why not).
	Checked bool
	// Refused are the images the nodes could not pull, one line a person
	// can act on each (the objects and containers, the image, every
	// endpoint tried and what it answered): preflight refuses them.
	Refused []string
	// Warnings are images that may not matter (a value of an image's
	// shape no pod renders) the nodes could not pull.
	Warnings []values.Warning
	// Note says what was checked (how many images, endpoints, requests,
	// the time), or why nothing was.
	Note string
	// Images are the images checked, for -o json.
	Images []ImageReport
}

// ImageReport is one image as the check saw it. It holds no credential.
type ImageReport struct {
	Image string `json:"image"` // normalized: docker.io/library/nginx:1.27
	// UsedBy says where it was found: "Deployment demo/web, container web".
	UsedBy []string `json:"usedBy"`
	// Endpoints are the endpoints asked, in order, and what each answered.
	Endpoints []ImageEndpoint `json:"endpoints"`
	// Platforms are those its manifest holds; NodePlatforms those of the
	// nodes its pods may run on.
	Platforms     []string `json:"platforms,omitempty"`
	NodePlatforms []string `json:"nodePlatforms,omitempty"`
	// Verdict: "pullable", or why not.
	Verdict string `json:"verdict"`
}

// ImageEndpoint is one endpoint asked for an image.
type ImageEndpoint struct {
	URL        string `json:"url"`
	Repository string `json:"repository"`
	Answer     string `json:"answer"` // "found", or what it answered
}

// CRDs is the port to the CustomResourceDefinitions of a chart's crds/
// folders, which Helm, Fleet and klipper-helm never upgrade (docs/design.md
// §7, "CRDs"). A job without one leaves them alone (apply.crds: skip).
type CRDs interface {
	// Check judges the CRDs of c and of the subcharts userValues enable
	// under the job's policy, and writes nothing.
	Check(ctx context.Context, c *Chart, userValues map[string]any) (*CRDCheck, error)
	// Apply creates or replaces the CRDs check says to, and waits until
	// each is Established; it returns what it did.
	Apply(ctx context.Context, check *CRDCheck) ([]CRDAction, error)
	// Backup keeps the CRDs check replaces, as they are, beside target's
	// backup from fromVersion, once: an existing copy is left as it is.
	// name is where ("" when none is replaced); created whether this call
	// wrote it.
	Backup(ctx context.Context, check *CRDCheck, target Ref, fromVersion string) (name string, created bool, err error)
}

// CRDCheck is the verdict on a chart's CRDs.
type CRDCheck struct {
	// Actions are the verdicts, one per CRD, in the chart's order.
	Actions []CRDAction
	// Refused are the reasons to refuse, one line a person can act on
	// each: preflight refuses them.
	Refused []string
	// Warnings are risks the upgrade goes ahead with (fields a new
	// schema no longer declares).
	Warnings []values.Warning
	// Objects are the CRDs the apply creates, replaces or migrates
	// (Change.CRDs).
	Objects []map[string]any
	// Plan is the adapter's own copy of what it decided.
	Plan any
}

// CRDAction is what an upgrade does with one CRD: create, replace,
// unchanged, kept (the policy leaves the cluster's) or refused.
type CRDAction struct {
	Name   string `json:"name"`
	From   string `json:"from"` // the chart's file
	Action string `json:"action"`
	Note   string `json:"note,omitempty"`
}

// String is the line for people: "widgets.example.com: replace (why)".
func (a CRDAction) String() string {
	if a.Note == "" {
		return a.Name + ": " + a.Action
	}
	return a.Name + ": " + a.Action + " (" + a.Note + ")"
}

// Cluster is the port to what the cluster offers every kind.
type Cluster interface {
	// Live reads the objects of live and once rules; a missing object is
	// left out (the merge reports it).
	Live(ctx context.Context, refs []values.ObjectRef) (values.LiveObjects, error)
	// NotReadyNodes names the nodes that are not Ready.
	NotReadyNodes(ctx context.Context) ([]string, error)
	// Lease is the coordination Lease name in namespace, held under this
	// process's identity; annotations say who holds it.
	Lease(namespace, name string, annotations map[string]string) Lease
	// Event records an Event on a target; failures are only logged.
	Event(ctx context.Context, e Event)
}

// ForbiddenSource is Cluster.Live's error when this process may not read
// the source of a live or once rule: the upgrade is refused, naming the
// rule and Grant, the RBAC rule that lets it read the source.
type ForbiddenSource struct {
	Ref   values.ObjectRef
	Grant string
	Err   error
}

func (e *ForbiddenSource) Error() string {
	return fmt.Sprintf("reading live source %s: %v", e.Ref, e.Err)
}
func (e *ForbiddenSource) Unwrap() error { return e.Err }

// Lease makes one process in the cluster the one that applies a target.
type Lease interface {
	// TryAcquire takes the Lease when it is free, expired or ours, never
	// waiting; when not, it says who holds it.
	TryAcquire(ctx context.Context) (held bool, holder string, err error)
	// Hold renews it until stop is called; lost is closed if another
	// process took it.
	Hold(ctx context.Context) (stop func(), lost <-chan struct{})
	// Release gives it up when we hold it; otherwise it writes nothing.
	Release(ctx context.Context) error
}

// Event is one Kubernetes Event on a target. It never carries values.
type Event struct {
	Target    Ref
	UID       string
	Warning   bool
	Reason    string
	Action    string
	Message   string
	Node      string
	Reporting string // the reporting instance: this process's identity
}

// ChartSource is where chart versions come from.
type ChartSource interface {
	// Load loads a version of a chart; the returned chart's Version is its
	// own spelling of it.
	Load(ctx context.Context, name, version string) (*Chart, error)
	// Versions lists the versions of a chart the source has.
	Versions(ctx context.Context, name string) ([]string, error)
	String() string
}

// Chart is what the core needs of one chart version.
type Chart struct {
	Name, Version string
	// Defaults are its coalesced default values, subcharts included.
	Defaults map[string]any
	// Keys are Defaults with the keys the chart sets to null kept (Helm
	// drops them from Defaults): every key the chart declares, for the
	// merge's orphan warnings; nil: those of Defaults.
	Keys map[string]any
	// RegeneratedData lists templates that generate data on every render.
	RegeneratedData []string
	// Archive is the chart packaged as a .tgz, for a target that carries
	// the chart itself.
	Archive func() ([]byte, error)
	// Check validates and renders the chart with user values; its error
	// wraps outcome.ErrRefused when the chart rejects them (exit 3), any
	// other error is a failure (exit 1).
	Check func(userValues map[string]any) error
	// Manifest renders the chart with user values as release name in
	// namespace: the objects Helm would apply, one YAML stream (errors as
	// Check's). For a target's conflict check.
	Manifest func(userValues map[string]any, name, namespace string) (string, error)
	// WithHooks renders it as Manifest does, and its hooks' objects after
	// the others: every object the upgrade makes (the image check's).
	WithHooks func(userValues map[string]any, name, namespace string) (string, error)
	// Trace renders it as Manifest does and says which values render
	// which fields (provenance); nil when unknown.
	Trace func(userValues map[string]any, name, namespace string) (*provenance.Map, error)
	// CRDFiles are the files of its crds/ folder and of those of the
	// subcharts user values enable, as Helm's install reads them; nil
	// when unknown.
	CRDFiles func(userValues map[string]any) ([]CRDFile, error)
}

// CRDFile is one file of a chart's crds/ folder.
type CRDFile struct {
	Path string // the chart's path to it: demo/charts/sub/crds/widgets.yaml
	Data []byte
}

// Traced is c's Trace; nil (no error) when c or its Trace is nil.
func (c *Chart) Traced(userValues map[string]any, name, namespace string) (*provenance.Map, error) {
	if c == nil || c.Trace == nil {
		return nil, nil
	}
	return c.Trace(userValues, name, namespace)
}

// Journal is the local record of which steps finished, per target and
// version.
type Journal interface {
	Load(target, version string) (Entry, bool, error)
	Save(e Entry) error
}

// Entry is what the journal knows about one upgrade of one target to one
// version. It holds hashes, never values.
type Entry struct {
	Target      string          `json:"target"`      // managedchart/NS/NAME
	FromVersion string          `json:"fromVersion"` // deployed when the upgrade started
	ToVersion   string          `json:"toVersion"`
	ValuesHash  string          `json:"valuesSha256,omitempty"` // applied or waited for
	Phases      map[string]Step `json:"phases"`                 // by step name, when finished
	// Gates are the health gates as the last wait judged them (a timed
	// out one included), for status.
	Gates     []health.Verdict `json:"gates,omitempty"`
	Completed bool             `json:"completed"`
	UpdatedAt time.Time        `json:"updatedAt"`
}

// ApplyInterrupted reports whether the upgrade of the entry made its
// intent (merge or restore finished), never finished its apply and never
// completed: the run was killed or failed in apply, and may have left the
// Lease held. (A later run that found the target applied and completed
// the entry has given that Lease up.)
func (e Entry) ApplyInterrupted() bool {
	_, merged := e.Phases[StepMerge]
	_, restored := e.Phases[StepRestore]
	_, applied := e.Phases[StepApply]
	return !e.Completed && (merged || restored) && !applied
}

// Step is one finished step in the journal.
type Step struct {
	FinishedAt time.Time `json:"finishedAt"`
	Duration   string    `json:"duration"`
	Note       string    `json:"note,omitempty"`
}

// Hooks runs the pre-<step> and post-<step> executables around each step.
type Hooks interface {
	// Run runs the hook kind ("pre" or "post") of step, if there is one.
	// stepErr is the step's result, for post hooks. A failing pre hook
	// wraps outcome.ErrRefused.
	Run(ctx context.Context, kind, step string, c HookContext, stepErr error) error
}

// HookContext tells a hook what is going on.
type HookContext struct {
	Target     Ref
	From, To   string
	Situation  Situation
	Node       string
	ValuesHash string
}
