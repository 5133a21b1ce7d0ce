package upgrade

import "context"

// verify closes the run: the journal records completion (the runner
// saves it), and the Lease is given up when this node holds it — taken by
// this run, or by an earlier run of this node that was killed before it
// released it (Release reads first and writes only when the Lease is
// ours).
func (j *jobRun) verify(ctx context.Context) error {
	if j.lease == nil {
		j.lease = j.Cluster.Lease(j.ref.Namespace, LeaseName(j.ref), nil)
	}
	return j.releaseLease(ctx)
}
