package managedchart

// narrowBD is a BundleDeployment as readiness reads it, for encoding/json:
// the fields ParseBundleDeployment reads, nothing else.
type narrowBD struct {
	Metadata struct {
		Name            string `json:"name"`
		Namespace       string `json:"namespace"`
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Spec struct {
		DeploymentID       string `json:"deploymentID"`
		StagedDeploymentID string `json:"stagedDeploymentID"`
	} `json:"spec"`
	Status struct {
		AppliedDeploymentID string `json:"appliedDeploymentID"`
		Ready               bool   `json:"ready"`
		NonReadyStatus      []struct {
			Kind      string `json:"kind"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
			Summary   struct {
				State   string `json:"state"`
				Message []any  `json:"message"`
			} `json:"summary"`
		} `json:"nonReadyStatus"`
		Conditions []struct {
			Type    string `json:"type"`
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"conditions"`
	} `json:"status"`
}

func (n *narrowBD) bundleDeployment() BundleDeployment {
	bd := BundleDeployment{Namespace: n.Metadata.Namespace, Name: n.Metadata.Name,
		DeploymentID: n.Spec.DeploymentID, StagedDeploymentID: n.Spec.StagedDeploymentID,
		AppliedDeploymentID: n.Status.AppliedDeploymentID, Ready: n.Status.Ready}
	for _, s := range n.Status.NonReadyStatus {
		bd.NonReady = append(bd.NonReady, renderObjectLine(s.Kind, s.Namespace, s.Name, s.Summary.State, s.Summary.Message))
	}
	for _, c := range n.Status.Conditions {
		if c.Type == "Deployed" {
			bd.DeployError = deployError(c.Status, c.Message)
		}
	}
	return bd
}
