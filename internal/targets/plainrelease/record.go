package plainrelease

import (
	"strconv"
	"strings"
	"time"

	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// The labels chart-upgrader puts on the release revision it made (Helm
// keeps them in its storage object, and copies them to later revisions of
// an upgrade). Label values are at most 63 characters of [A-Za-z0-9_.-]:
// the sha256 is split in two halves, a version's "+" is written "_", the
// time is in Unix seconds.
const (
	LabelVersion         = "chart-upgrader.io/version"
	LabelValuesHashHead  = "chart-upgrader.io/values-sha256-1"
	LabelValuesHashTail  = "chart-upgrader.io/values-sha256-2"
	LabelAppliedAt       = "chart-upgrader.io/applied-at"
	LabelPreviousVersion = "chart-upgrader.io/previous-version"
	// LabelFromRevision is the revision the apply started from: what a
	// rollback goes back to.
	LabelFromRevision = "chart-upgrader.io/from-revision"
	// LabelRevision is the revision the apply made. Helm copies a
	// revision's labels into the next one, so only a revision whose own
	// number is here carries a record written for it: the proof that a
	// pending revision is an interrupted apply of chart-upgrader's.
	LabelRevision = "chart-upgrader.io/revision"
)

// recordLabels are the labels of r, with from the revision the apply
// started from and made the revision it makes.
func recordLabels(r upgrade.Record, from, made int) map[string]string {
	l := map[string]string{
		LabelVersion:         labelVersion(r.Version),
		LabelPreviousVersion: labelVersion(r.PreviousVersion),
		LabelFromRevision:    strconv.Itoa(from),
		LabelRevision:        strconv.Itoa(made),
	}
	if len(r.ValuesHash) == 64 {
		l[LabelValuesHashHead], l[LabelValuesHashTail] = r.ValuesHash[:32], r.ValuesHash[32:]
	}
	if t, err := time.Parse(time.RFC3339, r.AppliedAt); err == nil {
		l[LabelAppliedAt] = strconv.FormatInt(t.Unix(), 10)
	}
	return l
}

// recordOf is the record the labels hold.
func recordOf(l map[string]string) upgrade.Record {
	r := upgrade.Record{Version: versionOfLabel(l[LabelVersion]), PreviousVersion: versionOfLabel(l[LabelPreviousVersion])}
	if h, t := l[LabelValuesHashHead], l[LabelValuesHashTail]; h != "" && t != "" {
		r.ValuesHash = h + t
	}
	if s, err := strconv.ParseInt(l[LabelAppliedAt], 10, 64); err == nil {
		r.AppliedAt = time.Unix(s, 0).UTC().Format(time.RFC3339)
	}
	return r
}

// fromRevision is the revision the recorded apply started from; 0 when
// the labels record none.
func fromRevision(l map[string]string) int {
	n, _ := strconv.Atoi(l[LabelFromRevision])
	return n
}

// labelVersion writes a chart version as a label value (semver's "+" is
// not allowed there, "_" is never in a version).
func labelVersion(v string) string { return strings.ReplaceAll(v, "+", "_") }

func versionOfLabel(v string) string { return strings.ReplaceAll(v, "_", "+") }
