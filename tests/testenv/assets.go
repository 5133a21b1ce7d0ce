package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// modulePath identifies the repository's go.mod.
const modulePath = "github.com/chart-upgrader/chart-upgrader"

// RepoRoot returns the repository root: the first directory holding this
// module's go.mod, walking up from the working directory, else from this
// source file (so a program run elsewhere, built from this checkout, finds
// it too).
func RepoRoot() (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	for _, dir := range starts {
		if root, ok := findModuleRoot(dir); ok {
			return root, nil
		}
	}
	return "", fmt.Errorf("finding the root of module %s from %v: no go.mod declares it", modulePath, starts)
}

func findModuleRoot(dir string) (string, bool) {
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(data), []byte("module "+modulePath)) {
			return dir, true
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

// FindAssets returns the directory holding kube-apiserver and etcd:
// $KUBEBUILDER_ASSETS when set, else what scripts/testenv of the repository
// prints (the script builds the binaries on its first run, which takes
// minutes; its progress goes to this process's stderr).
func FindAssets(ctx context.Context) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, checkAssets(dir)
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("locating scripts/testenv: %w", err)
	}
	script := filepath.Join(root, "scripts", "testenv")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("running %s: %w", script, err)
	}
	dir := strings.TrimSpace(string(out))
	return dir, checkAssets(dir)
}

func checkAssets(dir string) error {
	var errs []error
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			errs = append(errs, fmt.Errorf("checking control plane binary: %w", err))
		}
	}
	return errors.Join(errs...)
}
