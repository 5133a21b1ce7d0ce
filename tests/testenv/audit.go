package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// auditPolicy records the metadata of every request once it has been
// answered (and, for watches, when the response starts streaming).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditEvent is the part of a kube-apiserver audit event the tests use.
type AuditEvent struct {
	AuditID    string    `json:"auditID"`
	Stage      string    `json:"stage"`
	Verb       string    `json:"verb"`
	RequestURI string    `json:"requestURI"`
	UserAgent  string    `json:"userAgent"`
	User       AuditUser `json:"user"`
	// ImpersonatedUser is who the request acted as, when it impersonated.
	ImpersonatedUser *AuditUser      `json:"impersonatedUser,omitempty"`
	ObjectRef        *AuditObjectRef `json:"objectRef,omitempty"`
	ResponseStatus   *struct {
		Code int `json:"code"`
	} `json:"responseStatus,omitempty"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// AuditUser is who made the request.
type AuditUser struct {
	Username string   `json:"username"`
	Groups   []string `json:"groups,omitempty"`
}

// AuditObjectRef is what the request was about.
type AuditObjectRef struct {
	Resource    string `json:"resource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	APIGroup    string `json:"apiGroup,omitempty"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Subresource string `json:"subresource,omitempty"`
}

// ReadAuditLog returns one event per request in the audit log at path, in
// the order their first event was logged: the final stage seen for it
// (ResponseComplete, or ResponseStarted for a watch still open). A partly
// written last line is ignored.
func ReadAuditLog(path string) ([]AuditEvent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the audit log: %w", err)
	}
	defer f.Close()
	var (
		events []AuditEvent
		index  = map[string]int{}
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	line := 0
	var pending error
	for sc.Scan() {
		line++
		if pending != nil {
			return nil, pending
		}
		var ev AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			pending = fmt.Errorf("reading line %d of audit log %q: %w", line, path, err)
			continue
		}
		if i, ok := index[ev.AuditID]; ok {
			events[i] = ev
			continue
		}
		index[ev.AuditID] = len(events)
		events = append(events, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading audit log %q: %w", path, err)
	}
	return events, nil
}
