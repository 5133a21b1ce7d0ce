package helmchart

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

func TestEffectiveFailurePolicy(t *testing.T) {
	h := &HelmChart{Namespace: "kube-system", Name: "traefik"}
	p, from := Effective(h, nil)
	assert.Equal(t, PolicyReinstall, p)
	assert.Equal(t, "helm-controller's default: the HelmChart sets none", from)
	h.FailurePolicy = PolicyAbort
	p, from = Effective(h, &HelmChartConfig{Namespace: "kube-system", Name: "traefik"})
	assert.Equal(t, PolicyAbort, p, "a HelmChartConfig without one leaves the HelmChart's")
	assert.Equal(t, "helmchart kube-system/traefik", from)
	p, from = Effective(h, &HelmChartConfig{Namespace: "kube-system", Name: "traefik", FailurePolicy: PolicyRetry})
	assert.Equal(t, PolicyRetry, p, "a HelmChartConfig's overrides")
	assert.Equal(t, "HelmChartConfig kube-system/traefik", from)
}

func TestToWrite(t *testing.T) {
	assert.Equal(t, PolicyAbort, toWrite(DefaultOptions, false))
	assert.Equal(t, PolicyRetry, toWrite(DefaultOptions, true), "a restore moves a failed release back")
	assert.Equal(t, PolicyRetry, toWrite(Options{FailurePolicy: PolicyRetry}, false))
	assert.Empty(t, toWrite(Options{FailurePolicy: PolicyKeep}, false))
	assert.Empty(t, toWrite(Options{FailurePolicy: PolicyKeep}, true))
}

func TestCheckFailurePolicy(t *testing.T) {
	h := &HelmChart{Namespace: "ns", Name: "app", FailurePolicy: PolicyReinstall}
	c := CheckFailurePolicy(h, nil, DefaultOptions)
	assert.Empty(t, c.Problem)
	assert.Nil(t, c.Warning)
	assert.Equal(t, "failure policy reinstall (helmchart ns/app); the upgrade writes abort on the HelmChart with the new version", c.Note)

	c = CheckFailurePolicy(h, nil, Options{FailurePolicy: PolicyKeep})
	assert.Empty(t, c.Problem)
	require.NotNil(t, c.Warning)
	assert.Equal(t, values.WarnTarget, c.Warning.Kind)
	assert.Equal(t, "spec.failurePolicy", c.Warning.Path)
	assert.Contains(t, c.Warning.Message, "uninstalls the release")

	h.FailurePolicy = PolicyAbort
	c = CheckFailurePolicy(h, nil, Options{FailurePolicy: PolicyKeep})
	assert.Nil(t, c.Warning, "keep with abort: nothing to warn of")

	cfg := &HelmChartConfig{Namespace: "ns", Name: "app", FailurePolicy: PolicyReinstall}
	c = CheckFailurePolicy(h, cfg, DefaultOptions)
	assert.Contains(t, c.Problem, "HelmChartConfig ns/app sets spec.failurePolicy: reinstall (the CRD's default")
	assert.Contains(t, c.Note, "and HelmChartConfig ns/app's reinstall overrides it")
	c = CheckFailurePolicy(h, cfg, Options{FailurePolicy: PolicyKeep})
	assert.Empty(t, c.Problem, "keep accepts it")
	require.NotNil(t, c.Warning)

	cfg.FailurePolicy = PolicyAbort
	c = CheckFailurePolicy(h, cfg, DefaultOptions)
	assert.Empty(t, c.Problem)
	assert.Nil(t, c.Warning)
}

func TestParseOptions(t *testing.T) {
	parse := func(text string) (any, error) {
		f := yamlfile.File{Name: "spec.yaml"}
		root, err := f.Parse([]byte(text), "empty")
		require.NoError(t, err)
		return parseOptions(f, root, "charts[1].helmchart")
	}
	got, err := parse("failurePolicy: retry\n")
	require.NoError(t, err)
	assert.Equal(t, Options{FailurePolicy: PolicyRetry}, got)
	got, err = parse("{}\n")
	require.NoError(t, err)
	assert.Equal(t, DefaultOptions, got)
	_, err = parse("failurePolicy: reinstall\n")
	assert.ErrorContains(t, err, "spec.yaml:1: charts[1].helmchart.failurePolicy: reinstall uninstalls the running chart")
	_, err = parse("\nfailurePolicy: later\n")
	assert.ErrorContains(t, err, `spec.yaml:2: charts[1].helmchart.failurePolicy: unknown failure policy "later" (want abort, retry or keep)`)
	_, err = parse("failurePolicy: [abort]\n")
	assert.ErrorContains(t, err, "spec.yaml:1: charts[1].helmchart.failurePolicy")
}
