package kubecompat

import (
	"context"
	"fmt"
	"testing"

	chartcommon "helm.sh/helm/v4/pkg/chart/common"
	helmchart "helm.sh/helm/v4/pkg/chart/v2"
	rcommon "helm.sh/helm/v4/pkg/release/common"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// BenchmarkCheck is the size: 200 releases in Helm's secret
// storage (client-go's fake client: the tool's own time), 20 of whose
// charts read .Capabilities and are rendered at the target; it counts
// the LISTs of the storage and the GETs.
func BenchmarkCheck(b *testing.B) {
	kube := fake.NewClientset()
	for i := range 200 {
		ns := fmt.Sprintf("ns%d", i%20)
		tpl := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\ndata:\n  a: {{ .Values.a | quote }}\n"
		if i%10 == 0 {
			tpl = "{{- if semverCompare \">=1.30-0\" .Capabilities.KubeVersion.Version }}\n" + tpl + "{{- end }}\n"
		}
		c := &helmchart.Chart{Metadata: &helmchart.Metadata{APIVersion: "v2", Name: fmt.Sprintf("app%d", i), Version: "1.0.0", KubeVersion: ">=1.25.0-0"},
			Templates: []*chartcommon.File{{Name: "templates/cm.yaml", Data: []byte(tpl)}}, Values: map[string]any{"a": "b"}}
		rel := &release.Release{Name: fmt.Sprintf("rel%d", i), Namespace: ns, Version: 1, Chart: c, Config: map[string]any{"a": "c"},
			Info:     &release.Info{Status: rcommon.StatusDeployed},
			Manifest: fmt.Sprintf("---\n# Source: x/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: rel%d-cm\ndata:\n  a: \"c\"\n", i)}
		if err := driver.NewSecrets(kube.CoreV1().Secrets(ns)).Create(fmt.Sprintf("sh.helm.release.v1.%s.v1", rel.Name), rel); err != nil {
			b.Fatal(err)
		}
	}
	var lists, gets int
	kube.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "list":
			lists++
		case "get":
			gets++
		}
		return false, nil, nil
	})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		{Group: "helm.cattle.io", Version: "v1", Resource: "helmcharts"}: "HelmChartList", {Group: "management.cattle.io", Version: "v3", Resource: "managedcharts"}: "ManagedChartList"})
	target, _ := ParseVersion("1.37")
	current, _ := ParseVersion("1.33")
	ctx := context.Background()
	b.ReportAllocs()
	var rep *Report
	for b.Loop() {
		lists, gets = 0, 0
		var err error
		if rep, err = Check(ctx, Clients{Kube: kube, Dynamic: dyn}, Options{Target: target, Current: current}); err != nil {
			b.Fatal(err)
		}
	}
	if rep.Checked != 200 || rep.Rendered != 20 {
		b.Fatalf("checked %d, rendered %d", rep.Checked, rep.Rendered)
	}
	b.ReportMetric(float64(lists), "lists/op")
	b.ReportMetric(float64(gets), "gets/op")
}
