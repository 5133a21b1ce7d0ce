package crds

import (
	"fmt"
	"reflect"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/chart-upgrader/chart-upgrader/internal/manifest"
	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/upgrade"
)

// CRD is one CustomResourceDefinition of the crds/ files.
type CRD struct {
	From   string                     // the file that defines it
	Object *unstructured.Unstructured // as the file writes it: what is applied
	Typed  *apiextv1.CustomResourceDefinition
}

// Name is its metadata.name (widgets.example.com).
func (c CRD) Name() string { return c.Object.GetName() }

// Parse reads the CRDs of files, in their order. A document that is not an
// apiextensions.k8s.io/v1 CustomResourceDefinition, a field the type does
// not have, a CRD without a name, or one name that two documents define
// differently is bad input naming the file; the same CRD twice (a subchart
// vendored twice) is read once.
func Parse(files []upgrade.CRDFile) ([]CRD, error) {
	var out []CRD
	at := map[string]int{}
	for _, f := range files {
		objs, err := manifest.Objects(string(f.Data))
		if err != nil {
			return nil, outcome.BadInput(fmt.Errorf("%s: %w", f.Path, err))
		}
		for i, o := range objs {
			where := f.Path
			if len(objs) > 1 {
				where = fmt.Sprintf("%s (document %d)", f.Path, i+1)
			}
			c, err := parseOne(o, where)
			if err != nil {
				return nil, err
			}
			if j, seen := at[c.Name()]; seen {
				if !reflect.DeepEqual(out[j].Object.Object, c.Object.Object) {
					return nil, outcome.BadInput(fmt.Errorf("%s: the CustomResourceDefinition %s differs from the one %s defines: a chart may define each CRD once", where, c.Name(), out[j].From))
				}
				continue
			}
			at[c.Name()] = len(out)
			out = append(out, c)
		}
	}
	return out, nil
}

func parseOne(o *unstructured.Unstructured, where string) (CRD, error) {
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Group == apiextv1.GroupName && gvk.Kind == "CustomResourceDefinition" && gvk.Version != "v1":
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: %s is apiextensions.k8s.io/%s, which Kubernetes no longer serves (since 1.22): want apiextensions.k8s.io/v1", where, o.GetName(), gvk.Version))
	case gvk.Group != apiextv1.GroupName || gvk.Kind != "CustomResourceDefinition":
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: a %s %q is not a CustomResourceDefinition: a chart's crds/ folder holds only CRDs (move it to templates/)", where, o.GetKind(), o.GetName()))
	case o.GetName() == "":
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: a CustomResourceDefinition without metadata.name", where))
	}
	typed := &apiextv1.CustomResourceDefinition{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, typed, true); err != nil {
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: CustomResourceDefinition %s: %w", where, o.GetName(), err))
	}
	if want := typed.Spec.Names.Plural + "." + typed.Spec.Group; typed.Name != want {
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: CustomResourceDefinition %s: its name must be spec.names.plural.spec.group, %s", where, typed.Name, want))
	}
	if len(typed.Spec.Versions) == 0 {
		return CRD{}, outcome.BadInput(fmt.Errorf("%s: CustomResourceDefinition %s: spec.versions is empty", where, typed.Name))
	}
	// what the cluster keeps of a file's status is its own
	clean := o.DeepCopy()
	unstructured.RemoveNestedField(clean.Object, "status")
	return CRD{From: where, Object: clean, Typed: typed}, nil
}
