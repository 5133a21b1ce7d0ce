package crds

import (
	"context"
	"fmt"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
	"github.com/chart-upgrader/chart-upgrader/internal/values"
)

// Port is a job's upgrade.CRDs: the chart's CRDs under Policy, through
// Client.
type Port struct {
	Client *Client
	Policy Policy
}

// plan is what Check decided, for Apply.
type plan struct {
	crds      []CRD
	decisions []Decision
}

// Check reads the CRDs of c and of the subcharts userValues enable, and
// judges them (Client.Check).
func (p Port) Check(ctx context.Context, c *upgrade.Chart, userValues map[string]any) (*upgrade.CRDCheck, error) {
	out := &upgrade.CRDCheck{Plan: plan{}}
	if c == nil || c.CRDFiles == nil || p.Policy == Skip {
		return out, nil
	}
	files, err := c.CRDFiles(userValues)
	if err != nil {
		return nil, err
	}
	cs, err := Parse(files)
	if err != nil {
		return nil, fmt.Errorf("chart %s %s: %w", c.Name, c.Version, err)
	}
	ds, err := p.Client.Check(ctx, p.Policy, cs)
	if err != nil {
		return nil, err
	}
	out.Plan = plan{crds: cs, decisions: ds}
	for i, d := range ds {
		out.Actions = append(out.Actions, action(d))
		out.Refused = append(out.Refused, d.Refused...)
		for _, w := range d.Warnings {
			out.Warnings = append(out.Warnings, values.Warning{Kind: values.WarnCRDPrune, Path: d.Name, Message: w})
		}
		if d.Action == ActionCreate || d.Action == ActionReplace || d.Action == ActionMigrate {
			out.Objects = append(out.Objects, cs[i].Object.Object)
		}
	}
	return out, nil
}

// Apply carries out check (Client.Apply).
func (p Port) Apply(ctx context.Context, check *upgrade.CRDCheck) ([]upgrade.CRDAction, error) {
	pl, ok := check.Plan.(plan)
	if !ok {
		return nil, fmt.Errorf("applying CRDs: a verdict of another kind (%T)", check.Plan)
	}
	done, err := p.Client.Apply(ctx, pl.crds, pl.decisions)
	var out []upgrade.CRDAction
	for _, d := range done {
		out = append(out, action(d))
	}
	return out, err
}

// Backup keeps the CRDs check replaces, as they were, in the Secret
// BackupName(target, fromVersion) in the target's namespace, once.
func (p Port) Backup(ctx context.Context, check *upgrade.CRDCheck, target upgrade.Ref, fromVersion string) (string, bool, error) {
	pl, ok := check.Plan.(plan)
	if !ok {
		return "", false, fmt.Errorf("backing up CRDs: a verdict of another kind (%T)", check.Plan)
	}
	name := BackupName(target, fromVersion)
	created, err := p.Client.backup(ctx, pl.decisions, target.Namespace, name, map[string]string{
		"app.kubernetes.io/managed-by": "chart-upgrader", "chart-upgrader.io/target-kind": target.Kind, "chart-upgrader.io/target-name": target.Name})
	if err != nil {
		return "", false, err
	}
	return name, created, nil
}

func action(d Decision) upgrade.CRDAction {
	return upgrade.CRDAction{Name: d.Name, From: d.From, Action: string(d.Action), Note: d.Note}
}
