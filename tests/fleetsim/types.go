package fleetsim

// The status types, a subset of Fleet's with the same JSON names and
// omitempty choices (so summary counters other than ready and desiredReady
// are absent when zero, as with Fleet).

type condition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
	LastUpdateTime     string `json:"lastUpdateTime,omitempty"`
	LastTransitionTime string `json:"lastTransitionTime,omitempty"`
}

type resourceKey struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
}

type modifiedStatus struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	Missing    bool   `json:"missing,omitempty"`
	Delete     bool   `json:"delete,omitempty"`
	Patch      string `json:"patch,omitempty"`
}

type resourceSummary struct {
	State         string   `json:"state,omitempty"`
	Error         bool     `json:"error,omitempty"`
	Transitioning bool     `json:"transitioning,omitempty"`
	Message       []string `json:"message,omitempty"`
}

type nonReadyStatus struct {
	APIVersion string          `json:"apiVersion,omitempty"`
	Kind       string          `json:"kind,omitempty"`
	Namespace  string          `json:"namespace,omitempty"`
	Name       string          `json:"name,omitempty"`
	Summary    resourceSummary `json:"summary"`
}

type bdDisplay struct {
	Deployed  string `json:"deployed,omitempty"`
	Monitored string `json:"monitored,omitempty"`
	State     string `json:"state,omitempty"`
}

type bdStatus struct {
	AppliedDeploymentID string           `json:"appliedDeploymentID,omitempty"`
	Release             string           `json:"release,omitempty"`
	Ready               bool             `json:"ready,omitempty"`       // absent, never false, as Fleet writes it
	NonModified         bool             `json:"nonModified,omitempty"` // the same
	NonReadyStatus      []nonReadyStatus `json:"nonReadyStatus,omitempty"`
	ModifiedStatus      []modifiedStatus `json:"modifiedStatus,omitempty"`
	Conditions          []condition      `json:"conditions,omitempty"`
	Display             bdDisplay        `json:"display"`
	Resources           []resourceKey    `json:"resources,omitempty"`
	ResourceCounts      resourceCounts   `json:"resourceCounts"`
	SyncGeneration      int64            `json:"syncGeneration"`
}

// resourceCounts counts a deployment's objects by state, as Fleet's agent
// writes them (every counter, zero or not).
type resourceCounts struct {
	Ready        int `json:"ready"`
	DesiredReady int `json:"desiredReady"`
	WaitApplied  int `json:"waitApplied"`
	Modified     int `json:"modified"`
	Orphaned     int `json:"orphaned"`
	Missing      int `json:"missing"`
	Unknown      int `json:"unknown"`
	NotReady     int `json:"notReady"`
}

type nonReadyResource struct {
	Name           string           `json:"name,omitempty"`
	State          string           `json:"bundleState,omitempty"`
	Message        string           `json:"message,omitempty"`
	ModifiedStatus []modifiedStatus `json:"modifiedStatus,omitempty"`
	NonReadyStatus []nonReadyStatus `json:"nonReadyStatus,omitempty"`
}

type bundleSummary struct {
	NotReady          int                `json:"notReady,omitempty"`
	WaitApplied       int                `json:"waitApplied,omitempty"`
	ErrApplied        int                `json:"errApplied,omitempty"`
	OutOfSync         int                `json:"outOfSync,omitempty"`
	Modified          int                `json:"modified,omitempty"`
	Ready             int                `json:"ready"`
	Pending           int                `json:"pending,omitempty"`
	DesiredReady      int                `json:"desiredReady"`
	NonReadyResources []nonReadyResource `json:"nonReadyResources,omitempty"`
}

type bundleDisplay struct {
	ReadyClusters string `json:"readyClusters,omitempty"`
	State         string `json:"state,omitempty"`
}

type bundleStatus struct {
	Conditions            []condition   `json:"conditions,omitempty"`
	Summary               bundleSummary `json:"summary"`
	Unavailable           int           `json:"unavailable"`
	UnavailablePartitions int           `json:"unavailablePartitions"`
	MaxUnavailable        int           `json:"maxUnavailable"`
	Display               bundleDisplay `json:"display"`
	ObservedGeneration    int64         `json:"observedGeneration"`
	ResourcesSHA256Sum    string        `json:"resourcesSha256Sum,omitempty"`
	ResourceKey           []resourceKey `json:"resourceKey,omitempty"`
}
