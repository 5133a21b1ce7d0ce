// Package helmchart is the target kind of k3s and RKE2 HelmCharts
// (helm.cattle.io/v1), which the embedded helm-controller installs and
// upgrades with a Job running klipper-helm (docs/design.md §4.4,
// docs/helmchart.md).
//
// Everything specific to helm-controller is here: how a HelmChart's
// spec.valuesContent, spec.values and spec.set make the user values and
// how the merged values are written back (values.go); the HelmChartConfig
// of the same name as an overlay that is read and reported, never written;
// the chain the readiness judgement follows (readiness.go): the HelmChart,
// the values Secret and the Job helm-controller made of this spec, the Job's
// outcome, the Helm release it deployed and that release's workloads.
package helmchart
