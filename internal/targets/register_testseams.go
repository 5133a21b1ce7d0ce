//go:build testseams

package targets

import "github.com/chart-upgrader/chart-upgrader/internal/targets/kind"

// Register adds a kind to the registry, for a test that shows a new kind
// reaches every place that reads the registry. It exists only in test
// builds (-tags testseams), and returns a function that removes it again.
func Register(d kind.Descriptor, open Opener) (unregister func()) {
	registry = append(registry, entry{d, open})
	return func() {
		for i, e := range registry {
			if e.Name == d.Name {
				registry = append(registry[:i], registry[i+1:]...)
				return
			}
		}
	}
}
