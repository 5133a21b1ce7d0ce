package channel

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	yaml "go.yaml.in/yaml/v3"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
	"github.com/chart-upgrader/chart-upgrader/internal/yamlfile"
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

// LoadConfig reads and parses the channel server configuration at path.
func LoadConfig(path string) (*Config, error) {
	if path == "" {
		return nil, outcome.BadInput(fmt.Errorf("channel server configuration: no file given: give --config FILE (docs/reference.md, channel serve)"))
	}
	data, err := yamlfile.Read(path, "channel server configuration")
	if err != nil {
		return nil, err
	}
	return ParseConfig(yamlfile.Name(path), data)
}

// ParseConfig parses a channel server configuration; file names it in
// errors, and relative paths in it (source, caFile) are taken from the
// directory of file. It is read with the strict rules of package yamlfile
// (unknown or repeated fields, values of the wrong type, an empty file and a
// second YAML document are errors). A missing source, chart or channel, a
// channel name that is not one URL path element, a constraint that does not
// parse, a ttl that is not a positive duration and a baseURL that is not an
// http(s) URL are errors too. All are outcome.BadInput naming file, line and
// field.
func ParseConfig(file string, data []byte) (*Config, error) {
	p := yamlfile.File{Name: file}
	doc, err := p.Parse(data, "empty configuration (want source, chart and channels)")
	if err != nil {
		return nil, err
	}
	root, err := p.Fields(doc, "", "source", "chart", "ttl", "caFile", "channels", "baseURL")
	if err != nil {
		return nil, err
	}
	cfg := &Config{File: file, TTL: DefaultTTL}
	if cfg.Source, _, err = p.ReqString(root, "source"); err != nil {
		return nil, err
	}
	if cfg.Chart, _, err = p.ReqString(root, "chart"); err != nil {
		return nil, err
	}
	if cfg.CAFile, err = p.OptString(root, "caFile"); err != nil {
		return nil, err
	}
	if n := root.Get("ttl"); n != nil {
		if cfg.TTL, err = p.Duration(n, "ttl", "60s or 5m"); err != nil {
			return nil, err
		}
	}
	if cfg.BaseURL, err = baseURL(p, root); err != nil {
		return nil, err
	}
	if cfg.Channels, err = channels(p, root); err != nil {
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

func baseURL(p yamlfile.File, root *yamlfile.Fields) (string, error) {
	text, err := p.OptString(root, "baseURL")
	if err != nil || text == "" {
		return "", err
	}
	u, err := url.Parse(text)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", p.Failf(root.Get("baseURL"), "baseURL", "want an http(s) URL without query or fragment, not %q", text)
	}
	return strings.TrimRight(text, "/"), nil
}

func channels(p yamlfile.File, root *yamlfile.Fields) ([]Channel, error) {
	n, err := p.Required(root, "channels")
	if err != nil {
		return nil, err
	}
	if n.Kind != yaml.MappingNode || len(n.Content) == 0 {
		return nil, p.Failf(n, "channels", "want a map of channel names to constraints, with at least one")
	}
	names, err := p.Entries(n, "channels")
	if err != nil {
		return nil, err
	}
	var out []Channel
	for _, name := range names.Names() {
		field := names.Path(name)
		key, v := names.Key(name), names.Get(name)
		if !channelName.MatchString(name) {
			return nil, p.Failf(key, field, "a channel name is letters, digits, '.', '_' and '-', at most 63")
		}
		ch := Channel{Name: name}
		if v == nil {
			return nil, p.Failf(key, field, "missing a constraint (\"*\" means any version)")
		}
		switch v.Kind {
		case yaml.ScalarNode:
			if ch.Constraint, err = p.String(v, field); err != nil {
				return nil, err
			}
		case yaml.MappingNode:
			f, err := p.Fields(v, field, "constraint", "devel")
			if err != nil {
				return nil, err
			}
			if ch.Constraint, _, err = p.ReqString(f, "constraint"); err != nil {
				return nil, err
			}
			if d := f.Get("devel"); d != nil {
				if ch.Devel, err = p.Bool(d, f.Path("devel")); err != nil {
					return nil, err
				}
			}
		default:
			return nil, p.Failf(v, field, "want a constraint, or a map with constraint and devel")
		}
		if _, err := semver.NewConstraint(ch.Constraint); err != nil {
			return nil, p.Failf(v, field, "version constraint %q: %v", ch.Constraint, err)
		}
		out = append(out, ch)
	}
	slices.SortFunc(out, func(a, b Channel) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
