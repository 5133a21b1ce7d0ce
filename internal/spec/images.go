package spec

import (
	"fmt"

	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/values"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
)

// Images says how preflight checks the images an upgrade runs (images:).
type Images struct {
	// Skip: images.check: false; no image is checked, and the report says
	// so.
	Skip bool
	// Values are the images the values name for operators to run, which
	// no pod template of the chart holds (images.values).
	Values []ImageValue
	// Discover: the values of an image's common shape are checked too
	// (images.discover, default true), a failure a warning.
	Discover bool
}

// ImageValue is one entry of images.values: a values path holding a whole
// reference (Image), or the paths of its pieces (Repository required;
// Registry, Tag and Digest optional). At names it in the spec.
type ImageValue struct {
	Image, Registry, Repository, Tag, Digest string
	At                                       string
}

// DefaultImages: images checked, the common shapes discovered.
var DefaultImages = Images{Discover: true}

// images reads images: {check: bool, discover: bool, values: [{image} |
// {repository, tag, registry, digest}]}.
func (w walker) images(n *yaml.Node, field string) (Images, error) {
	out := DefaultImages
	if n == nil {
		return out, nil
	}
	f, err := w.Fields(n, field, "check", "discover", "values")
	if err != nil {
		return out, err
	}
	if cn := f.Get("check"); cn != nil {
		check, err := w.Bool(cn, f.Path("check"))
		if err != nil {
			return out, err
		}
		out.Skip = !check
	}
	if dn := f.Get("discover"); dn != nil {
		if out.Discover, err = w.Bool(dn, f.Path("discover")); err != nil {
			return out, err
		}
	}
	vn := f.Get("values")
	if vn == nil {
		return out, nil
	}
	items, err := w.Sequence(vn, f.Path("values"))
	if err != nil {
		return out, err
	}
	for i, item := range items {
		at := yamlfile.Index(f.Path("values"), i)
		v, err := w.imageValue(item, at)
		if err != nil {
			return out, err
		}
		out.Values = append(out.Values, v)
	}
	return out, nil
}

func (w walker) imageValue(n *yaml.Node, field string) (ImageValue, error) {
	f, err := w.Fields(n, field, "image", "registry", "repository", "tag", "digest")
	if err != nil {
		return ImageValue{}, err
	}
	v := ImageValue{At: fmt.Sprintf("%s:%d: %s", w.Name, n.Line, field)}
	for _, p := range []struct {
		key string
		to  *string
	}{{"image", &v.Image}, {"registry", &v.Registry}, {"repository", &v.Repository}, {"tag", &v.Tag}, {"digest", &v.Digest}} {
		if *p.to, err = w.OptString(f, p.key); err != nil {
			return ImageValue{}, err
		}
		if *p.to == "" {
			continue
		}
		pat, err := values.ParsePattern(*p.to)
		if err != nil {
			return ImageValue{}, w.Fail(f.Get(p.key), f.Path(p.key), err)
		}
		if !pat.Concrete() {
			return ImageValue{}, w.Failf(f.Get(p.key), f.Path(p.key), "%q has a wildcard: want the path of one value", *p.to)
		}
	}
	switch {
	case v.Image != "" && (v.Registry != "" || v.Repository != "" || v.Tag != "" || v.Digest != ""):
		return ImageValue{}, w.Failf(n, field, "image names a whole reference: give it alone, or repository with tag, registry and digest")
	case v.Image == "" && v.Repository == "":
		return ImageValue{}, w.Failf(n, field, "want image (the path of a whole reference) or repository (with tag, registry, digest)")
	}
	return v, nil
}
