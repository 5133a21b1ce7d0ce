package deps
import (
 _ "github.com/urfave/cli/v2"
 _ "helm.sh/helm/v3/pkg/chart/loader"
 _ "helm.sh/helm/v3/pkg/chartutil"
 _ "helm.sh/helm/v3/pkg/engine"
 _ "helm.sh/helm/v3/pkg/action"
 _ "helm.sh/helm/v3/pkg/repo"
 _ "github.com/mikefarah/yq/v4/pkg/yqlib"
 _ "k8s.io/apimachinery/pkg/api/resource"
 _ "k8s.io/client-go/dynamic"
 _ "sigs.k8s.io/controller-runtime/pkg/envtest"
 _ "github.com/stretchr/testify/require"
 _ "github.com/Masterminds/semver/v3"
)

