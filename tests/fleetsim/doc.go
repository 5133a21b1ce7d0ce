// Package fleetsim simulates Rancher's ManagedChart controller, the Fleet
// controller and the Fleet agent against a real API server, closely enough
// for chart-upgrader's end-to-end tests, demo and benchmarks
// (docs/design.md §4.2 describes the chain it stands for):
//
//   - Rancher: each ManagedChart <name> (management.cattle.io/v3) becomes a
//     Bundle mcc-<name> (fleet.cattle.io/v1alpha1) in the same namespace with
//     the Helm options, paused, targets, rolloutStrategy and diff copied. The
//     chart version must be loadable (the ChartLoader stands for the
//     ClusterRepo), else the ManagedChart's Defined condition is False and the
//     Bundle is left alone. The ManagedChart status is a copy of the Bundle
//     status (so status.observedGeneration is the Bundle's generation) plus a
//     Defined condition.
//   - Fleet controller: one BundleDeployment per simulated cluster, labelled
//     fleet.cattle.io/bundle-name and fleet.cattle.io/bundle-namespace, in one
//     namespace per Bundle namespace (ClusterNamespace). Its
//     spec.stagedDeploymentID follows the Bundle content; spec.deploymentID
//     follows it only while the Bundle is not paused. The Bundle status
//     (summary, unavailable, display, Ready condition, observedGeneration) is
//     computed from the BundleDeployments the way Fleet does.
//   - Agent: for the first cluster, "local", the chart is really installed or
//     upgraded with the Helm 4 SDK as Fleet v0.16.1's agent calls it:
//     install server-side (client-side with helm.takeOwnership or
//     helm.force), upgrade with "auto" (the apply method the release
//     recorded; client-side with helm.force, which replaces objects) and
//     takeOwnership, under the agent's field manager "fleetagent" (Fleet
//     sets none, so Helm names it after the binary; the simulator's writes
//     get that name on the way out, since Helm's field manager is one
//     variable of the process and the tool under test sets it to "helm"),
//     the Bundle values being the complete user values with no reuse or
//     reset flag (so, as with Helm itself, an
//     upgrade given no values at all keeps the previous release's values);
//     the other clusters only report, with the objects the deployment
//     renders (rendered once per deploymentID, client-side). Each
//     BundleDeployment status then reports, as Fleet's agent writes it, the
//     applied deploymentID and readiness, status.resources (every object),
//     resourceCounts, release and four conditions; with spec.options and
//     spec.stagedOptions carrying the values, a BundleDeployment of a
//     dozen-object chart weighs about 12 KB, as real ones do. A release left
//     pending by an interrupted upgrade is marked failed before the next one.
//
// A field-manager conflict of the server-side apply (an operator's hotfix
// of a field the chart changes) is retried with the same back-off, each
// try a failed Helm revision with the conflict as its description, and, as
// real Fleet v0.16.1 does, reported nowhere: the BundleDeployment keeps the
// deployment before as applied and ready, the Bundle says WaitApplied with
// no message.
//
// A failing deployment (Fault.ErrApplied, or another Helm error) is reported as
// real Fleet v0.16 reports it: appliedDeploymentID stays the one before,
// the Deployed condition is False with the error, while status.ready and
// the Ready condition keep what the deployment before left (true for a
// chart that was ready); the Bundle counts it errApplied and puts the error
// in its Ready message. On the local cluster Helm really runs and fails
// (Fault.ErrApplied adds an object the API server refuses to the rendered
// chart), so each attempt leaves a failed Helm revision, and objects the
// attempt changed before failing stay changed. The agent retries a failed
// deployment after a back-off that doubles (Options.RetryBackoff, up to a
// minute); Helm's history keeps 2 revisions as Fleet's (the last deployed
// one is never pruned). Fault.ErrAppliedVersion fails only the deployments
// of one chart version, as a chart that cannot be deployed does.
//
// deploymentIDs are hashes of the Bundle's content and options without
// diff, as Fleet's: going back to a spec whose ID the BundleDeployment last
// applied counts as applied at once and runs no Helm action; changing a
// Helm option (timeoutSeconds, maxHistory) changes the ID and runs Helm
// again; changing diff.comparePatches reaches the BundleDeployments but
// not the ID.
//
// With helm.timeoutSeconds > 0 the agent waits for the rollout inside Helm,
// as Fleet's does: the deployment is reported applied only once ready (the
// Bundle says WaitApplied meanwhile, never NotReady) and Helm's revision is
// pending-install or pending-upgrade meanwhile. A rollout still not ready
// when the timeout runs out fails the revision and the deployment with
// Helm's "context deadline exceeded" (ErrApplied); the retry runs Helm
// again and holds a new revision pending for its own wait. Without a
// timeout the deployment is applied at once, then NotReady until ready.
//
// Drift: on the local cluster the agent watches the objects of the
// release and, Options.DriftDelay after one changes (5 s by default, the
// sleep of Fleet's drift trigger), compares each live object with what
// Helm rendered: a field the chart sets that the live object has with
// another value, or lacks, is drift, after the BundleDeployment's
// diff.comparePatches (jsonPointers and remove operations) are taken out
// of both sides. A drifted object is reported as Fleet does (state
// Modified, nonModified absent, modifiedStatus with a JSON merge patch that
// would restore the rendered values, Ready False naming it), a missing one
// as missing; a change of comparePatches is re-checked at once and runs no
// Helm action.
//
// Not modelled: Fleet's three-way comparison (the simulator's patch holds
// the rendered values of the fields that differ, not Fleet's exact patch),
// objects the chart does not render that Fleet would flag as extra, drift
// on clusters other than the local one, correctDrift; the error texts of a
// Fault.ErrApplied deployment are the fault's, not Helm's; and Helm's
// wait itself: the upgrade writes its revision deployed and the simulator
// sets it pending at once, so for a moment it reads deployed.
//
// Faults (SetFault) make a chart slow, never ready, failing or stale, at
// any time; drift is caused for real, by editing the objects. Everything is driven by watches; a status write happens
// only when the status changes, and the generation of a Bundle moves only
// when its spec really changes (the API server does that).
//
// The simulator owns the Bundles and BundleDeployments of the namespaces it
// serves: run one simulator per namespace (Options.Namespace) or one for all,
// never both on the same namespace. It reacts to its own writes at once and
// to others' through informers, which after an API server restart reconnect
// with client-go's back-off (seconds).
package fleetsim
