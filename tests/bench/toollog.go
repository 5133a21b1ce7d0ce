package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"time"
)

// toolLog is what the benchmarks read from chart-upgrader's JSON log
// (log times have millisecond precision).
type toolLog struct {
	// WaitStart is when the wait phase started, Ready when the wait saw
	// the target ready; per target, the last seen.
	WaitStart, Ready map[string]time.Time
	// Phases are the durations of the phases that finished, by phase.
	Phases map[string][]time.Duration
}

func parseToolLog(out []byte) toolLog {
	l := toolLog{WaitStart: map[string]time.Time{}, Ready: map[string]time.Time{}, Phases: map[string][]time.Duration{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var line struct {
			Time     time.Time `json:"time"`
			Msg      string    `json:"msg"`
			Phase    string    `json:"phase"`
			Target   string    `json:"target"`
			Duration string    `json:"duration"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Msg == "phase done" {
			if d, err := time.ParseDuration(line.Duration); err == nil {
				l.Phases[line.Phase] = append(l.Phases[line.Phase], d)
			}
		}
		switch {
		case line.Msg == "phase start" && line.Phase == "wait":
			l.WaitStart[line.Target] = line.Time
		case line.Msg == "phase done" && line.Phase == "wait":
			l.Ready[line.Target] = line.Time
		}
	}
	return l
}
