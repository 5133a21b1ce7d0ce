package helmchart

import (
	"encoding/json"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/chart-upgrader/chart-upgrader/internal/cluster"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Kind is the kind's name in --target and in the kind registry.
const Kind = "helmchart"

// The resources of helm-controller.
var (
	HelmChartGVR       = schema.GroupVersionResource{Group: "helm.cattle.io", Version: "v1", Resource: "helmcharts"}
	HelmChartConfigGVR = schema.GroupVersionResource{Group: "helm.cattle.io", Version: "v1", Resource: "helmchartconfigs"}
)

// What helm-controller v0.17.9 names and labels (pkg/controllers/chart).
const (
	// LabelChart is on the Job and its pods: the HelmChart's name.
	LabelChart = "helmcharts.helm.cattle.io/chart"
	// KeyConfigHash is the Job pod template's annotation ("SHA256=<hex>")
	// and, cut to 63 characters after the "=", the label klipper-helm
	// puts on the release it deploys (also the Job's env CONFIG_HASH).
	KeyConfigHash = "helmcharts.helm.cattle.io/configHash"
	// AnnotationUnmanaged makes helm-controller leave a HelmChart alone.
	AnnotationUnmanaged = "helmcharts.helm.cattle.io/unmanaged"
	// ConditionFailed and ConditionJobCreated are the HelmChart's conditions.
	ConditionFailed     = "Failed"
	ConditionJobCreated = "JobCreated"
)

// JobName is the Job helm-controller runs for a HelmChart.
func JobName(helmChart string) string { return "helm-install-" + helmChart }

// ValuesSecretName is the Secret helm-controller writes the HelmChart's
// values into, which the Job mounts.
func ValuesSecretName(helmChart string) string { return "chart-values-" + helmChart }

// HelmChart is what chart-upgrader uses of a HelmChart.
type HelmChart struct {
	Namespace, Name string
	Chart           string // spec.chart: a name in Repo, a URL, or a name with ChartContent
	Repo            string
	Version         string
	ChartContent    string // base64 of a .tgz
	TargetNamespace string // spec.targetNamespace, else Namespace
	Driver          string // Helm's storage driver: "secret" (default) or "configmap"
	ValuesContent   string
	Values          map[string]any // spec.values
	Set             []SetEntry     // spec.set, sorted by key
	FailurePolicy   string         // spec.failurePolicy; "" when not set
	ServerSide      string         // spec.serverSide (auto, true, false); "" when not set
	ValuesSecrets   []SecretRef
	Annotations     map[string]string
	Conditions      []Condition
	ResourceVersion string
	UID             string
	Object          *unstructured.Unstructured
}

// SetEntry is one entry of spec.set. Value is an int64 (an IntOrString
// holding an int) or a string.
type SetEntry struct {
	Key   string
	Value any
}

// SecretRef is one entry of spec.valuesSecrets.
type SecretRef struct {
	Name string
	Keys []string
}

// Condition is one condition of a HelmChart's status.
type Condition struct{ Type, Status, Reason, Message string }

// Condition returns the condition of type t.
func (h *HelmChart) Condition(t string) (Condition, bool) {
	for _, c := range h.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// Ref is helmchart/NS/NAME.
func (h *HelmChart) Ref() string { return fmt.Sprintf("%s/%s/%s", Kind, h.Namespace, h.Name) }

// ReleaseName is the Helm release the HelmChart deploys: its name.
func (h *HelmChart) ReleaseName() string { return h.Name }

// ParseHelmChart reads a HelmChart object. A spec field of the wrong type
// is an error naming it.
func ParseHelmChart(u *unstructured.Unstructured) (*HelmChart, error) {
	h := &HelmChart{Namespace: u.GetNamespace(), Name: u.GetName(), Annotations: u.GetAnnotations(),
		ResourceVersion: u.GetResourceVersion(), UID: string(u.GetUID()), Object: u}
	spec, _ := u.Object["spec"].(map[string]any)
	where := func(field string) string { return fmt.Sprintf("helmchart %s/%s spec.%s", h.Namespace, h.Name, field) }
	strs := []struct {
		field string
		to    *string
	}{{"chart", &h.Chart}, {"repo", &h.Repo}, {"version", &h.Version}, {"chartContent", &h.ChartContent},
		{"targetNamespace", &h.TargetNamespace}, {"driver", &h.Driver}, {"valuesContent", &h.ValuesContent},
		{"failurePolicy", &h.FailurePolicy}, {"serverSide", &h.ServerSide}}
	for _, s := range strs {
		v, ok := spec[s.field]
		if !ok || v == nil {
			continue
		}
		str, isStr := v.(string)
		if !isStr {
			return nil, fmt.Errorf("%s: want a string, got %T", where(s.field), v)
		}
		*s.to = str
	}
	if h.TargetNamespace == "" {
		h.TargetNamespace = h.Namespace
	}
	if h.Driver == "" {
		h.Driver = cluster.SecretDriver
	}
	if v, ok := spec["values"]; ok && v != nil {
		m, isMap := values.Normalize(v).(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("%s: want a map, got %T", where("values"), v)
		}
		h.Values = m
	}
	if v, ok := spec["set"]; ok && v != nil {
		m, isMap := v.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("%s: want a map of strings and integers, got %T", where("set"), v)
		}
		for k, e := range m {
			switch x := e.(type) {
			case string:
				h.Set = append(h.Set, SetEntry{Key: k, Value: x})
			case int64:
				h.Set = append(h.Set, SetEntry{Key: k, Value: x})
			case float64: // a JSON number decoded as float
				if x != float64(int64(x)) {
					return nil, fmt.Errorf("%s[%q]: want a string or an integer, got %v", where("set"), k, x)
				}
				h.Set = append(h.Set, SetEntry{Key: k, Value: int64(x)})
			case json.Number:
				n, err := x.Int64()
				if err != nil {
					return nil, fmt.Errorf("%s[%q]: want a string or an integer, got %s", where("set"), k, x)
				}
				h.Set = append(h.Set, SetEntry{Key: k, Value: n})
			default:
				return nil, fmt.Errorf("%s[%q]: want a string or an integer, got %T", where("set"), k, e)
			}
		}
		sort.Slice(h.Set, func(i, j int) bool { return h.Set[i].Key < h.Set[j].Key })
	}
	h.ValuesSecrets = secretRefs(spec)
	if status, ok := u.Object["status"].(map[string]any); ok {
		if conds, ok := status["conditions"].([]any); ok {
			for _, c := range conds {
				m, _ := c.(map[string]any)
				str := func(k string) string { s, _ := m[k].(string); return s }
				h.Conditions = append(h.Conditions, Condition{Type: str("type"), Status: str("status"),
					Reason: str("reason"), Message: str("message")})
			}
		}
	}
	return h, nil
}

// HelmChartConfig is what chart-upgrader reads of a HelmChartConfig: the
// values it lays over the HelmChart's.
type HelmChartConfig struct {
	Namespace, Name string
	ValuesContent   string
	Values          map[string]any
	ValuesSecrets   []SecretRef
	// FailurePolicy is spec.failurePolicy, which overrides the
	// HelmChart's; "" when not set.
	FailurePolicy string
	// ServerSide is spec.serverSide, which overrides the HelmChart's; ""
	// when not set.
	ServerSide string
}

// ParseHelmChartConfig reads a HelmChartConfig object.
func ParseHelmChartConfig(u *unstructured.Unstructured) (*HelmChartConfig, error) {
	c := &HelmChartConfig{Namespace: u.GetNamespace(), Name: u.GetName()}
	spec, _ := u.Object["spec"].(map[string]any)
	if v, ok := spec["valuesContent"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			return nil, fmt.Errorf("helmchartconfig %s/%s spec.valuesContent: want a string, got %T", c.Namespace, c.Name, v)
		}
		c.ValuesContent = s
	}
	if v, ok := spec["failurePolicy"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			return nil, fmt.Errorf("helmchartconfig %s/%s spec.failurePolicy: want a string, got %T", c.Namespace, c.Name, v)
		}
		c.FailurePolicy = s
	}
	if v, ok := spec["serverSide"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr {
			return nil, fmt.Errorf("helmchartconfig %s/%s spec.serverSide: want a string, got %T", c.Namespace, c.Name, v)
		}
		c.ServerSide = s
	}
	if v, ok := spec["values"]; ok && v != nil {
		m, isMap := values.Normalize(v).(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("helmchartconfig %s/%s spec.values: want a map, got %T", c.Namespace, c.Name, v)
		}
		c.Values = m
	}
	c.ValuesSecrets = secretRefs(spec)
	return c, nil
}

// secretRefs reads spec.valuesSecrets.
func secretRefs(spec map[string]any) []SecretRef {
	var out []SecretRef
	list, _ := spec["valuesSecrets"].([]any)
	for _, e := range list {
		m, _ := e.(map[string]any)
		name, _ := m["name"].(string)
		var keys []string
		ks, _ := m["keys"].([]any)
		for _, k := range ks {
			if s, ok := k.(string); ok {
				keys = append(keys, s)
			}
		}
		out = append(out, SecretRef{Name: name, Keys: keys})
	}
	return out
}
