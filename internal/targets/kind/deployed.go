package kind

// Deployed is a Helm release that an object of a kind deploys (a
// HelmChart's, through helm-controller; a ManagedChart's, through Fleet).
type Deployed struct {
	// Object names the deploying object as its kind is spelled: "HelmChart
	// ns/name".
	Object string
	// When says when its controller next applies the release.
	When string
	// Repo and Chart are the chart source the object names itself (a
	// HelmChart's spec.repo and spec.chart), "" when it names none.
	Repo, Chart string
}
