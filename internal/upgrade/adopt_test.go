package upgrade

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/provenance"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// driftingTarget is the fake target with a drift to report: the one
// fault-free port method a fake can stand for in the pure core's tests
// (the real drift is read in tests/e2e*, against an API server).
type driftingTarget struct {
	*fakeTarget
	report   DriftReport
	deployed []string // the deployed chart versions Drift was given
}

func (d *driftingTarget) Drift(_ context.Context, _ *Observed, deployed *Chart) (DriftReport, error) {
	d.deployed = append(d.deployed, deployed.Version)
	return d.report, nil
}

// a replica count an operator scaled to 5, which web.replicas renders
func scaled() DriftField {
	return DriftField{Object: "Deployment app/web", Field: ".spec.replicas", Owner: "kubectl", Live: "5", Rendered: "3", Differs: true,
		Reading: provenance.Reading{Source: provenance.Source{Assignments: []provenance.Assignment{{Path: "replicas", Value: int64(5), Was: int64(3), Changed: true}}},
			Adopt: []provenance.Adopted{{Keys: []string{"replicas"}, Value: int64(5)}}}}
}

// An adopt rule writes the live value of the field it renders, reported
// with the object, the field and the manager; read against the deployed
// chart. Without an adopt rule nothing is read.
func TestAdoptRulesReadTheDriftAgainstTheDeployedChart(t *testing.T) {
	e := newEnv(t)
	d := &driftingTarget{fakeTarget: e.target, report: DriftReport{Fields: []DriftField{scaled()}}}
	e.job.Target = d
	e.job.Rules = append([]values.Rule{rule(t, "adopt", "replicas")}, e.job.Rules...)
	e.mustRun(GoalUpgrade)
	assert.Equal(t, int64(5), e.target.current().Values["replicas"])
	assert.Contains(t, e.out.String(), "adopted from the live Deployment app/web .spec.replicas (changed by kubectl)")
	assert.Contains(t, d.deployed, "1.0.0", "read against the deployed chart")

	e = newEnv(t)
	d = &driftingTarget{fakeTarget: e.target, report: DriftReport{Fields: []DriftField{scaled()}}}
	e.job.Target = d
	e.mustRun(GoalUpgrade)
	assert.Equal(t, int64(3), e.target.current().Values["replicas"], "no adopt rule: the user value")
	assert.Empty(t, d.deployed, "no adopt rule: no drift read")
}

// A target that cannot compare its objects adopts nothing, and says so.
func TestAdoptWithoutADrifterWarns(t *testing.T) {
	e := newEnv(t)
	e.job.Rules = append([]values.Rule{rule(t, "adopt", "replicas")}, e.job.Rules...)
	e.mustRun(GoalUpgrade)
	assert.Equal(t, int64(3), e.target.current().Values["replicas"])
	assert.Contains(t, e.out.String(), "cannot compare its objects with what it deployed: the adopt rules adopt nothing")
}

// A drifted object (Fleet's Modified) whose changed fields the adopt rules
// all adopt is a warning; one with a field they do not adopt is refused.
func TestPreflightWeighsDriftAgainstAdoptRules(t *testing.T) {
	web := values.ObjectRef{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web"}
	setup := func(t *testing.T, fields ...DriftField) *env {
		e := newEnv(t)
		e.target.health = Health{Drift: []Drift{{Object: web, Patch: `{"spec":{"replicas":3}}`}}}
		e.job.Target = &driftingTarget{fakeTarget: e.target, report: DriftReport{Fields: fields}}
		e.job.Rules = append([]values.Rule{rule(t, "adopt", "replicas")}, e.job.Rules...)
		return e
	}
	e := setup(t, scaled())
	e.mustRun(GoalUpgrade)
	assert.Contains(t, e.out.String(), "adopt rules take its live values, so this upgrade renders them and the drift ends")

	image := DriftField{Object: "Deployment app/web", Field: ".spec.template.spec.containers[name=\"web\"].image", Owner: "kubectl-set", Differs: true,
		Reading: provenance.Reading{Source: provenance.Source{Reason: provenance.ReasonNoValue}}}
	e = setup(t, scaled(), image)
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), "apps/v1 Deployment app/web was changed in the cluster")
	assert.Contains(t, err.Error(), "nor adopt rule adopts it")
	assert.Zero(t, e.target.applyCalls)
}

// A target with nothing to compare (no release of it on this cluster)
// adopts nothing and says why; the upgrade goes on.
func TestAdoptWithNothingToCompareWarns(t *testing.T) {
	e := newEnv(t)
	e.job.Target = &driftingTarget{fakeTarget: e.target, report: DriftReport{Unread: "no helm release app/app on this cluster to compare with"}}
	e.job.Rules = append([]values.Rule{rule(t, "adopt", "replicas")}, e.job.Rules...)
	e.mustRun(GoalUpgrade)
	assert.Equal(t, int64(3), e.target.current().Values["replicas"])
	assert.Contains(t, e.out.String(), "no helm release app/app on this cluster to compare with: the adopt rules adopt nothing")
}
