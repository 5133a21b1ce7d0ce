//go:build cpuprofile

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// With -tags cpuprofile (scripts/bench-scale with PROFILE set), each run
// writes its CPU profile to $CPUPROFILE_DIR/chart-upgrader-<pid>.pprof.
// Never in a release build.
func init() {
	dir := os.Getenv("CPUPROFILE_DIR")
	if dir == "" {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("chart-upgrader-%d.pprof", os.Getpid())))
	if err != nil {
		fmt.Fprintln(os.Stderr, "cpuprofile:", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintln(os.Stderr, "cpuprofile:", err)
		_ = f.Close()
		return
	}
	beforeExit = func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}
}
