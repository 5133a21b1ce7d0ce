package spec

import (
	"github.com/chart-upgrader/chart-upgrader/internal/targets"
)

// kinds are the registered kinds: the spec reads what the registry says.
var kinds = targets.Kinds()
