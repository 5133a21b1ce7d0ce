// Package klipperhelm runs the Jobs of k3s's helm-controller in the test
// environment, in place of the klipper-helm image they name: no kubelet
// runs there (tests/testenv's workloads mode has KWOK for fake nodes), so
// nothing would run a Job's container. Everything else is real: the
// helm-controller process, the Job controller that creates the pod and
// judges how the Job ended, the scheduler, the API server.
//
// The Executor watches the pods of helm-controller's Jobs (label
// helmcharts.helm.cattle.io/chart). When one is Running, it does what the
// pod's container would, from the pod alone:
//
//   - the inputs klipper-helm's entry script reads: the container's args
//     (install or delete; --namespace, --create-namespace, --version,
//     --set, --set-string, as helm-controller v0.17.9's args() writes them)
//     and env (NAME, VERSION, REPO, CHART, HELM_DRIVER, TARGET_NAMESPACE,
//     FAILURE_POLICY, TIMEOUT, CONFIG_HASH, EXPECTED_RELEASE_REVISION); the
//     values files of the projected volume "values" (the Secrets and keys
//     helm-controller's setValuesSecret and valuesSecretAddConfig project,
//     in the order of their file names, as /config/*.yaml sorts them); the
//     chart from the ConfigMap of volume "content" (NAME.tgz.base64, as
//     helm_content_decode reads it), else chart CHART of the Helm repository
//     REPO (helm_repo_init);
//   - then helm_update of klipper-helm's entry (commit 09c5242), with the
//     Helm SDK: the release's status and revision; "delete" uninstalls;
//     no release installs; check_revision ends the run successfully,
//     doing nothing, when the newest revision is not
//     EXPECTED_RELEASE_REVISION; pending-install, pending-upgrade,
//     pending-rollback, superseded and uninstalling are set to failed, and
//     pending-upgrade and superseded are then upgraded; deployed is
//     upgraded; failed (and unknown) follows FAILURE_POLICY: abort fails,
//     reinstall uninstalls and installs, retry upgrades and succeeds
//     whatever Helm says. Install and upgrade pass the values files, the
//     set flags, TIMEOUT, and the label helmcharts.helm.cattle.io/configHash
//     = CONFIG_HASH on the release (klipper-helm's --labels); no --wait,
//     as klipper-helm passes none;
//   - it writes the pod's status as a kubelet would for helm-controller's
//     restartPolicy OnFailure: success terminates the container with exit
//     code 0 (phase Succeeded); a failure terminates it with exit code 1
//     and, as its termination message, the lines klipper-helm writes to
//     /dev/termination-log (the container's terminationMessagePolicy is
//     File: Helm's error itself goes to the pod's log, which only the
//     Executor's Log shows here), then restarts it
//     (restartCount + 1, CrashLoopBackOff) after a back-off that doubles,
//     and runs it again. The real Job controller counts those restarts
//     against the Job's backoffLimit and fails the Job
//     (BackoffLimitExceeded) past it.
//
// Not done: Helm 4's server-side apply flags (the Helm SDK here is v3),
// `helm mapkubeapis`, charts at a URL, repository credentials and CAs.
package klipperhelm
