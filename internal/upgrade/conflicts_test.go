package upgrade

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// conflictingTarget is a fake target with a conflict check that answers
// what it is given, and records the change it was asked about.
type conflictingTarget struct {
	*fakeTarget
	answer Conflicts
	err    error
	asked  []Change
}

func (c *conflictingTarget) Conflicts(_ context.Context, _ *Observed, ch Change) (Conflicts, error) {
	c.asked = append(c.asked, ch)
	return c.answer, c.err
}

// Preflight asks the target about the change it means to write (the new
// version and U'), before anything is written: a conflict it names
// refuses the upgrade (exit 3) with that line and nothing applied; a
// warning reaches the report and the upgrade goes on; a chart that does
// not render as the release is a refusal too; any other error fails.
func TestPreflightRefusesTheConflictsTheTargetNames(t *testing.T) {
	e := newEnv(t)
	ct := &conflictingTarget{fakeTarget: e.target, answer: Conflicts{Refused: []string{"field-manager conflict: Deployment ns/web .spec.x", "the ways out"}}}
	e.job.Target = ct
	_, err := e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), "- field-manager conflict: Deployment ns/web .spec.x\n- the ways out")
	assert.Zero(t, e.target.applyCalls, "nothing written")
	require.Len(t, ct.asked, 1)
	assert.Equal(t, "2.0.0", ct.asked[0].Version)
	assert.NotNil(t, ct.asked[0].Chart)
	assert.NotNil(t, ct.asked[0].Values, "U'")
	assert.Equal(t, "2.0.0", ct.asked[0].Record.Version)
	assert.NotEmpty(t, ct.asked[0].Record.ValuesHash)

	e = newEnv(t)
	ct = &conflictingTarget{fakeTarget: e.target, answer: Conflicts{
		Warnings: []values.Warning{{Kind: values.WarnFieldOwner, Path: "Deployment ns/web .spec.x", Message: "overwritten"}},
		Note:     "conflict check: 3 objects"}}
	e.job.Target = ct
	e.mustRun(GoalUpgrade)
	assert.Equal(t, 1, e.target.applyCalls)
	assert.Contains(t, e.out.String(), string(values.WarnFieldOwner))
	assert.Contains(t, e.log.String(), "conflict check: 3 objects")

	e = newEnv(t)
	e.job.Target = &conflictingTarget{fakeTarget: e.target, err: outcome.Refused(errors.New("rendering chart app-2.0.0: refuses the namespace"))}
	_, err = e.run(GoalUpgrade)
	require.ErrorIs(t, err, outcome.ErrRefused)
	assert.Contains(t, err.Error(), "refuses the namespace")
	assert.Zero(t, e.target.applyCalls)

	e = newEnv(t)
	e.job.Target = &conflictingTarget{fakeTarget: e.target, err: errors.New("the API server went away")}
	_, err = e.run(GoalUpgrade)
	require.Error(t, err)
	assert.NotErrorIs(t, err, outcome.ErrRefused)
	assert.Zero(t, e.target.applyCalls)
}
