//go:build !linux

package host

import "fmt"

// prepareDir needs Linux: it works on O_PATH descriptors.
func prepareDir(dir string, _ Owner) (Prepared, error) {
	return Prepared{Dir: dir}, fmt.Errorf("preparing %s: chart-upgrader host prepare works on Linux only", dir)
}
