package managedchart

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/targets/specobject"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// The resources chart-upgrader reads.
var (
	ManagedChartGVR     = schema.GroupVersionResource{Group: "management.cattle.io", Version: "v3", Resource: "managedcharts"}
	BundleGVR           = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundles"}
	BundleDeploymentGVR = schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: "bundledeployments"}
)

// The annotations chart-upgrader writes on a target (package specobject).
const (
	AnnotationVersion         = specobject.AnnotationVersion
	AnnotationValuesHash      = specobject.AnnotationValuesHash
	AnnotationAppliedAt       = specobject.AnnotationAppliedAt
	AnnotationPreviousVersion = specobject.AnnotationPreviousVersion
	AnnotationPaused          = specobject.AnnotationPaused
)

// Labels Fleet puts on a BundleDeployment.
const (
	LabelBundleName      = "fleet.cattle.io/bundle-name"
	LabelBundleNamespace = "fleet.cattle.io/bundle-namespace"
)

// BundleName is the Fleet Bundle Rancher makes of a ManagedChart.
func BundleName(managedChart string) string { return "mcc-" + managedChart }

// ManagedChart is what chart-upgrader uses of a ManagedChart.
type ManagedChart struct {
	Namespace, Name  string
	Chart, Version   string
	ReleaseName      string
	DefaultNamespace string
	Values           map[string]any
	Paused           bool
	Annotations      map[string]string
	ResourceVersion  string
	Generation       int64
	Status           BundleStatus // Rancher's copy of the Bundle status
	Object           *unstructured.Unstructured

	// valuesHash, when set, is ValuesHash of Values, worked out once per
	// resourceVersion by the Observer (hashing marshals the values).
	valuesHash string
}

// Ref names the ManagedChart as managedchart/NAMESPACE/NAME.
func (m *ManagedChart) Ref() string { return fmt.Sprintf("managedchart/%s/%s", m.Namespace, m.Name) }

// Release is the Helm release name Fleet deploys the chart as:
// spec.releaseName, else the name of the Bundle's BundleDeployment,
// mcc-<name> (fleetReleaseName).
func (m *ManagedChart) Release() string {
	if m.ReleaseName != "" {
		return m.ReleaseName
	}
	return fleetReleaseName(BundleName(m.Name))
}

// ReleaseNamespace is the namespace Fleet deploys the release into:
// spec.defaultNamespace, else "default".
func (m *ManagedChart) ReleaseNamespace() string {
	if m.DefaultNamespace == "" {
		return "default"
	}
	return m.DefaultNamespace
}

// ValuesHash is the hash of the values it holds now (values.Hash).
func (m *ManagedChart) ValuesHash() string {
	if m.valuesHash != "" {
		return m.valuesHash
	}
	h, _ := values.Hash(m.Values)
	return h
}

// PausedByUs reports whether chart-upgrader paused it.
func (m *ManagedChart) PausedByUs() bool { return m.Annotations[AnnotationPaused] == "true" }

// Bundle is what chart-upgrader uses of a Fleet Bundle.
type Bundle struct {
	Name        string
	UID         string
	Generation  int64
	HelmVersion string
	// HelmTimeoutSeconds is spec.helm.timeoutSeconds: > 0, the agent
	// waits for the rollout inside Helm (WaitApplied until it finishes,
	// ErrApplied when Helm's wait times out).
	HelmTimeoutSeconds int64
	Values             map[string]any
	HasValues          bool // spec.helm.values is present (not moved to a Secret)
	Paused             bool
	Status             BundleStatus
	ResourceCount      int

	valuesHash string // as ManagedChart.valuesHash
}

// ValuesHash is the hash of spec.helm.values (values.Hash).
func (b *Bundle) ValuesHash() string {
	if b.valuesHash != "" {
		return b.valuesHash
	}
	h, _ := values.Hash(b.Values)
	return h
}

// BundleStatus is Fleet's BundleStatus, the parts readiness needs.
type BundleStatus struct {
	ObservedGeneration int64
	Conditions         []Condition
	Summary            Summary
	Unavailable        int64
	ReadyClusters      string // display.readyClusters, "r/d"
	State              string // display.state
}

// Condition is a status condition.
type Condition struct {
	Type, Status, Reason, Message string
}

// Summary is Fleet's BundleSummary.
type Summary struct {
	DesiredReady, Ready, NotReady, ErrApplied, Modified, WaitApplied, OutOfSync, Pending int64
	NonReadyResources                                                                    []NonReadyResource
}

// NonReadyResource is a BundleDeployment that is not ready, with why.
type NonReadyResource struct {
	Name, State, Message string
	Details              []string // "kind namespace/name: summary" of its objects
	// Modified are its objects changed in the cluster (not missing, not
	// extra), with Fleet's patch.
	Modified []upgrade.Drift
}

// Condition returns the condition of that type.
func (s BundleStatus) Condition(t string) (Condition, bool) {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// BundleDeployment is what chart-upgrader uses of a BundleDeployment.
type BundleDeployment struct {
	Namespace, Name     string
	DeploymentID        string
	StagedDeploymentID  string
	AppliedDeploymentID string
	Ready               bool
	NonReady            []string
	// DeployError is the message of its Deployed condition when that is
	// False: the agent could not deploy (Fleet's ErrApplied). Fleet keeps
	// ready true from the deployment before, so only this and the
	// deployment IDs show the failure.
	DeployError string
	// DeployErrorAt is when the agent last changed that condition
	// (lastUpdateTime: wrangler touches it only when a value changes);
	// SpecAt is when its spec was last written (its managedFields, the
	// API server's clock). An error older than the spec belongs to a
	// deployment before the one asked now. Zero when not known.
	DeployErrorAt, SpecAt time.Time
}

// ParseManagedChart reads a ManagedChart object.
func ParseManagedChart(u *unstructured.Unstructured) (*ManagedChart, error) {
	m := &ManagedChart{Namespace: u.GetNamespace(), Name: u.GetName(), Annotations: u.GetAnnotations(),
		ResourceVersion: u.GetResourceVersion(), Generation: u.GetGeneration(), Object: u}
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	spec, _ := u.Object["spec"].(map[string]any)
	m.Chart = str(spec, "chart")
	m.Version = str(spec, "version")
	m.ReleaseName = str(spec, "releaseName")
	m.DefaultNamespace = str(spec, "defaultNamespace")
	m.Paused, _ = spec["paused"].(bool)
	switch v := values.Normalize(spec["values"]).(type) {
	case nil:
		m.Values = map[string]any{}
	case map[string]any:
		m.Values = v
	default:
		return nil, fmt.Errorf("managedchart %s/%s: spec.values is not a map", m.Namespace, m.Name)
	}
	status, _ := u.Object["status"].(map[string]any)
	m.Status = parseBundleStatus(status)
	return m, nil
}

// ParseBundle reads a Fleet Bundle object.
func ParseBundle(u *unstructured.Unstructured) *Bundle {
	b := &Bundle{Name: u.GetName(), UID: string(u.GetUID()), Generation: u.GetGeneration()}
	spec, _ := u.Object["spec"].(map[string]any)
	helm, _ := spec["helm"].(map[string]any)
	b.HelmVersion = str(helm, "version")
	b.HelmTimeoutSeconds = num(helm, "timeoutSeconds")
	if v, ok := helm["values"]; ok {
		b.HasValues = true
		b.Values, _ = values.Normalize(v).(map[string]any)
		if b.Values == nil {
			b.Values = map[string]any{}
		}
	}
	b.Paused, _ = spec["paused"].(bool)
	status, _ := u.Object["status"].(map[string]any)
	b.Status = parseBundleStatus(status)
	return b
}

// ParseBundleDeployment reads a Fleet BundleDeployment object.
func ParseBundleDeployment(u *unstructured.Unstructured) BundleDeployment {
	spec, _ := u.Object["spec"].(map[string]any)
	status, _ := u.Object["status"].(map[string]any)
	bd := BundleDeployment{Namespace: u.GetNamespace(), Name: u.GetName(),
		DeploymentID: str(spec, "deploymentID"), StagedDeploymentID: str(spec, "stagedDeploymentID"),
		AppliedDeploymentID: str(status, "appliedDeploymentID")}
	bd.Ready, _ = status["ready"].(bool)
	for _, item := range list(status, "nonReadyStatus") {
		bd.NonReady = append(bd.NonReady, objectLine(item))
	}
	for _, c := range list(status, "conditions") {
		if str(c, "type") == "Deployed" {
			bd.DeployError = deployError(str(c, "status"), str(c, "message"))
			bd.DeployErrorAt, _ = time.Parse(time.RFC3339, str(c, "lastUpdateTime"))
		}
	}
	for _, m := range u.GetManagedFields() {
		if m.Subresource == "" && m.Time != nil && m.Time.After(bd.SpecAt) {
			bd.SpecAt = m.Time.Time
		}
	}
	return bd
}

func parseBundleStatus(status map[string]any) BundleStatus {
	s := BundleStatus{ObservedGeneration: num(status, "observedGeneration"), Unavailable: num(status, "unavailable")}
	for _, c := range list(status, "conditions") {
		s.Conditions = append(s.Conditions, Condition{Type: str(c, "type"), Status: str(c, "status"),
			Reason: str(c, "reason"), Message: RedactSecretPatches(str(c, "message"))})
	}
	display, _ := status["display"].(map[string]any)
	s.ReadyClusters, s.State = str(display, "readyClusters"), str(display, "state")
	sum, _ := status["summary"].(map[string]any)
	s.Summary = Summary{DesiredReady: num(sum, "desiredReady"), Ready: num(sum, "ready"), NotReady: num(sum, "notReady"),
		ErrApplied: num(sum, "errApplied"), Modified: num(sum, "modified"), WaitApplied: num(sum, "waitApplied"),
		OutOfSync: num(sum, "outOfSync"), Pending: num(sum, "pending")}
	for _, r := range list(sum, "nonReadyResources") {
		nr := NonReadyResource{Name: str(r, "name"), State: str(r, "bundleState"), Message: RedactSecretPatches(str(r, "message"))}
		for _, m := range list(r, "modifiedStatus") {
			what := "modified"
			switch {
			case m["missing"] == true:
				what = "missing"
			case m["delete"] == true:
				what = "extra"
			default:
				patch := str(m, "patch")
				if str(m, "kind") == "Secret" && patch != "" {
					patch = redactedPatch // a Secret's change carries its data
				}
				nr.Modified = append(nr.Modified, upgrade.Drift{Patch: patch, Object: values.ObjectRef{
					APIVersion: str(m, "apiVersion"), Kind: str(m, "kind"), Namespace: str(m, "namespace"), Name: str(m, "name")}})
				if patch != "" {
					what += " " + patch
				}
			}
			nr.Details = append(nr.Details, fmt.Sprintf("%s %s", objectLine(m), what))
		}
		for _, n := range list(r, "nonReadyStatus") {
			nr.Details = append(nr.Details, objectLine(n))
		}
		s.Summary.NonReadyResources = append(s.Summary.NonReadyResources, nr)
	}
	return s
}

// objectLine renders "Kind namespace/name: summary" of a status entry.
func objectLine(m map[string]any) string {
	sum, _ := m["summary"].(map[string]any)
	messages, _ := sum["message"].([]any)
	return renderObjectLine(str(m, "kind"), str(m, "namespace"), str(m, "name"), str(sum, "state"), messages)
}

// renderObjectLine renders "Kind namespace/name: state; message; …"; of
// the messages only the strings count.
func renderObjectLine(kind, namespace, name, state string, messages []any) string {
	if namespace != "" {
		name = namespace + "/" + name
	}
	line := strings.TrimSpace(kind + " " + name)
	var msgs []string
	if state != "" {
		msgs = append(msgs, state)
	}
	for _, x := range messages {
		if s, ok := x.(string); ok {
			msgs = append(msgs, s)
		}
	}
	if len(msgs) > 0 {
		line += ": " + strings.Join(msgs, "; ")
	}
	return line
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func num(m map[string]any, k string) int64 {
	switch v := m[k].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	case int:
		return int64(v)
	}
	return 0
}

func list(m map[string]any, k string) []map[string]any {
	items, _ := m[k].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if mm, ok := it.(map[string]any); ok {
			out = append(out, mm)
		}
	}
	return out
}

// deployError is what a Deployed condition of that status and message says
// of a failure: "" unless the status is False.
func deployError(status, message string) string {
	if status != "False" {
		return ""
	}
	if message == "" {
		return "the agent could not deploy it (no message)"
	}
	return message
}

// redactedPatch stands for the patch Fleet shows for a changed Secret.
const redactedPatch = "<redacted: the change of a Secret>"

// RedactSecretPatches replaces the patch Fleet writes after each changed
// Secret in a status message ("secret.v1 ns/name modified {...}": the
// Secret's data) with redactedPatch, so that no message chart-upgrader
// prints carries a Secret's data.
func RedactSecretPatches(msg string) string {
	const marker = " modified {"
	var b strings.Builder
	for {
		i := strings.Index(msg, marker)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		head := msg[:i]
		start := i + len(marker) - 1 // the opening brace
		end := matchingBrace(msg, start)
		if lastField(head) != "secret.v1" {
			b.WriteString(msg[:end])
			msg = msg[end:]
			continue
		}
		b.WriteString(msg[:start])
		b.WriteString(redactedPatch)
		msg = msg[end:]
	}
}

// lastField is the word before the last one of s: Fleet writes
// "secret.v1 ns/name modified {...}", so before " modified" comes the
// object and before it the kind.
func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) < 2 {
		return ""
	}
	return f[len(f)-2]
}

// matchingBrace is the index after the brace that closes the one at
// start, skipping JSON strings; len(s) when it is not closed.
func matchingBrace(s string, start int) int {
	depth, inString, escaped := 0, false, false
	for i := start; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case inString:
		case c == '{':
			depth++
		case c == '}':
			depth--
			if depth == 0 {
				return i + 1
			}
		}
	}
	return len(s)
}
