package channel

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

// DefaultTTL is how long a channel server trusts the index it read.
const DefaultTTL = 60 * time.Second

// Config configures a Server. It is read from YAML:
//
//	source: https://charts.example.com   # a Helm repository URL, or a directory of charts
//	chart: harvester                     # the chart the channels follow
//	ttl: 60s                             # how long the index is trusted (default 60s)
//	caFile: /etc/ssl/extra-ca.pem        # optional: extra certificate authorities for source
//	channels:                            # name: constraint, or name: {constraint, devel}
//	  stable: ">=1.4.0 <2.0.0"
//	  latest: "*"
//	  devel: {constraint: "*", devel: true}
//	baseURL: https://charts.example.com/releases   # optional: Location is <baseURL>/<version>
type Config struct {
	File     string        // the file it was read from, for messages
	Source   string        // Helm repository URL or chart directory
	Chart    string        // chart name in Source
	TTL      time.Duration // > 0
	CAFile   string        // optional
	Channels []Channel     // at least one, sorted by name
	BaseURL  string        // optional; without a trailing '/'
}

// Channel is one channel a Server serves.
type Channel struct {
	Name       string `json:"name"`
	Constraint string `json:"constraint"`
	Devel      bool   `json:"devel,omitempty"` // prereleases satisfy Constraint
}

// channelName is what a channel may be called: one URL path element.
var channelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// yamlLine splits the line number off a YAML syntax error.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// LoadConfig reads and parses the channel server configuration at path.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, outcome.BadInput(fmt.Errorf("channel server configuration: no file given"))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.BadInput(fmt.Errorf("reading channel server configuration: %w", err))
	}
	return ParseConfig(path, data)
}

// ParseConfig parses a channel server configuration; file names it in
// errors, and relative paths in it (source, caFile) are taken from the
// directory of file. Unknown or repeated fields, a missing source, chart or
// channel, a channel name that is not one URL path element, a constraint that
// does not parse, a ttl that is not a positive duration and a baseURL that is
// not an http(s) URL are outcome.BadInput errors naming file, line and field.
func ParseConfig(file string, data []byte) (*Config, error) {
	p := parser{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
			return nil, outcome.BadInput(fmt.Errorf("%s:%s: invalid YAML: %s", file, m[1], m[2]))
		}
		return nil, outcome.BadInput(fmt.Errorf("%s: invalid YAML: %w", file, err))
	}
	if len(doc.Content) == 0 {
		return nil, p.fail(nil, "", "empty configuration (want source, chart and channels)")
	}
	root, err := p.mapping(doc.Content[0], "", "source", "chart", "ttl", "caFile", "channels", "baseURL")
	if err != nil {
		return nil, err
	}
	cfg := &Config{File: file, TTL: DefaultTTL}
	if cfg.Source, err = p.str(root, "source", true); err != nil {
		return nil, err
	}
	if cfg.Chart, err = p.str(root, "chart", true); err != nil {
		return nil, err
	}
	if cfg.CAFile, err = p.str(root, "caFile", false); err != nil {
		return nil, err
	}
	if cfg.TTL, err = p.ttl(root); err != nil {
		return nil, err
	}
	if cfg.BaseURL, err = p.baseURL(root); err != nil {
		return nil, err
	}
	if cfg.Channels, err = p.channels(root); err != nil {
		return nil, err
	}
	dir := filepath.Dir(file)
	if !strings.Contains(cfg.Source, "://") && !filepath.IsAbs(cfg.Source) {
		cfg.Source = filepath.Join(dir, cfg.Source)
	}
	if cfg.CAFile != "" && !filepath.IsAbs(cfg.CAFile) {
		cfg.CAFile = filepath.Join(dir, cfg.CAFile)
	}
	return cfg, nil
}

func (p parser) ttl(root fields) (time.Duration, error) {
	text, err := p.str(root, "ttl", false)
	if err != nil || text == "" {
		return DefaultTTL, err
	}
	d, err := time.ParseDuration(text)
	if err != nil || d <= 0 {
		return 0, p.fail(root.values["ttl"], "ttl", "want a positive duration such as 60s or 5m, not %q", text)
	}
	return d, nil
}

func (p parser) baseURL(root fields) (string, error) {
	text, err := p.str(root, "baseURL", false)
	if err != nil || text == "" {
		return "", err
	}
	u, err := url.Parse(text)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", p.fail(root.values["baseURL"], "baseURL", "want an http(s) URL without query or fragment, not %q", text)
	}
	return strings.TrimRight(text, "/"), nil
}

func (p parser) channels(root fields) ([]Channel, error) {
	n := root.values["channels"]
	if n == nil {
		return nil, p.fail(root.node, "", "missing required field %q", "channels")
	}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, p.fail(n, "channels", "want a map of channel names to constraints, with at least one")
	}
	names, err := p.mapping(n, "channels")
	if err != nil {
		return nil, err
	}
	var out []Channel
	for _, name := range names.order {
		field := "channels." + name
		key, v := names.keys[name], names.values[name]
		if !channelName.MatchString(name) {
			return nil, p.fail(key, field, "a channel name is letters, digits, '.', '_' and '-', at most 63")
		}
		ch := Channel{Name: name}
		if v == nil {
			return nil, p.fail(key, field, "missing a constraint (\"*\" means any version)")
		}
		switch v.Kind {
		case yaml.ScalarNode:
			ch.Constraint = v.Value
		case yaml.MappingNode:
			f, err := p.mapping(v, field, "constraint", "devel")
			if err != nil {
				return nil, err
			}
			if ch.Constraint, err = p.str(f, "constraint", true); err != nil {
				return nil, err
			}
			if d := f.values["devel"]; d != nil {
				if err := d.Decode(&ch.Devel); err != nil || d.Tag != "!!bool" {
					return nil, p.fail(d, field+".devel", "want true or false")
				}
			}
		default:
			return nil, p.fail(v, field, "want a constraint, or a map with constraint and devel")
		}
		if _, err := semver.NewConstraint(ch.Constraint); err != nil {
			return nil, p.fail(v, field, "version constraint %q: %v", ch.Constraint, err)
		}
		out = append(out, ch)
	}
	slices.SortFunc(out, func(a, b Channel) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// parser builds errors located in one file.
type parser struct{ file string }

// fields are the fields of a YAML mapping, in file order.
type fields struct {
	node   *yaml.Node
	field  string
	order  []string
	keys   map[string]*yaml.Node
	values map[string]*yaml.Node
}

// fail returns an outcome.BadInput error at n's line (none when n is nil).
func (p parser) fail(n *yaml.Node, field, format string, args ...any) error {
	loc := p.file
	if n != nil {
		loc = fmt.Sprintf("%s:%d", p.file, n.Line)
	}
	if field != "" {
		loc += ": " + field
	}
	return outcome.BadInput(fmt.Errorf("%s: %s", loc, fmt.Sprintf(format, args...)))
}

// mapping reads the mapping n, refusing repeated keys, keys that are not
// strings, and (when allowed is given) keys not in allowed.
func (p parser) mapping(n *yaml.Node, field string, allowed ...string) (fields, error) {
	f := fields{node: n, field: field, keys: map[string]*yaml.Node{}, values: map[string]*yaml.Node{}}
	if n.Kind != yaml.MappingNode {
		return f, p.fail(n, field, "want a map")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := join(field, k.Value)
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			return f, p.fail(k, field, "want a plain field name")
		}
		if len(allowed) > 0 && !slices.Contains(allowed, k.Value) {
			return f, p.fail(k, name, "unknown field (want one of %s)", strings.Join(allowed, ", "))
		}
		if prev, ok := f.keys[k.Value]; ok {
			return f, p.fail(k, name, "repeated field (first at line %d)", prev.Line)
		}
		f.order = append(f.order, k.Value)
		f.keys[k.Value] = k
		if v.Kind == yaml.AliasNode {
			v = v.Alias
		}
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			v = nil
		}
		f.values[k.Value] = v
	}
	return f, nil
}

// str returns the string field key of f; a required one must be non-empty.
func (p parser) str(f fields, key string, required bool) (string, error) {
	n := f.values[key]
	name := join(f.field, key)
	if n == nil {
		if required {
			if k := f.keys[key]; k != nil {
				return "", p.fail(k, name, "missing a value (required)")
			}
			return "", p.fail(f.node, f.field, "missing required field %q", key)
		}
		return "", nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		return "", p.fail(n, name, "want a string")
	}
	if required && strings.TrimSpace(n.Value) == "" {
		return "", p.fail(n, name, "must not be empty")
	}
	return n.Value, nil
}

func join(parent, key string) string {
	if parent == "" {
		return key
	}
	return parent + "." + key
}
