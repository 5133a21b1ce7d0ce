package imagecheck

import (
	"bufio"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/net/http/httpproxy"
)

// This file reads the proxy a k3s or RKE2 node's containerd pulls through.
// Neither has a setting of its own for it: k3s and RKE2 run as systemd
// units whose environment files may set HTTP_PROXY, HTTPS_PROXY and
// NO_PROXY (the process's, passed on to containerd and the kubelet) and
// CONTAINERD_HTTP_PROXY, CONTAINERD_HTTPS_PROXY and CONTAINERD_NO_PROXY
// (containerd's only: k3s hands containerd every CONTAINERD_ variable
// without its prefix, after the others, so that each wins over the plain
// one of its name). containerd, a Go program, then proxies each request as
// Go's http.ProxyFromEnvironment does (httpproxy.FromEnvironment).
//
// Documented in https://docs.k3s.io/advanced#configuring-an-http-proxy
// (the install script writes the variables to
// /etc/systemd/system/k3s.service.env or k3s-agent.service.env) and
// https://docs.rke2.io/advanced#configuring-an-http-proxy
// (/etc/default/rke2-server or rke2-agent).

// nodeUnit is a systemd unit that runs a node's containerd, with the
// environment files it reads (EnvironmentFile=-…, each optional), in the
// order systemd reads them: a later file's variable wins. Paths are
// relative to the node's /.
type nodeUnit struct {
	name  string
	files []string
}

// nodeUnits are the units of k3s (server, agent) and RKE2 (server, agent)
// as their install scripts write them: /etc/default/%N,
// /etc/sysconfig/%N, then k3s's /etc/systemd/system/%N.service.env, and
// RKE2's %N.env beside its unit (/usr/local/lib/systemd/system for the
// tarball, /usr/lib/systemd/system for the RPM).
var nodeUnits = []nodeUnit{
	{"k3s", []string{"etc/default/k3s", "etc/sysconfig/k3s", "etc/systemd/system/k3s.service.env"}},
	{"k3s-agent", []string{"etc/default/k3s-agent", "etc/sysconfig/k3s-agent", "etc/systemd/system/k3s-agent.service.env"}},
	{"rke2-server", []string{"etc/default/rke2-server", "etc/sysconfig/rke2-server",
		"usr/local/lib/systemd/system/rke2-server.env", "usr/lib/systemd/system/rke2-server.env"}},
	{"rke2-agent", []string{"etc/default/rke2-agent", "etc/sysconfig/rke2-agent",
		"usr/local/lib/systemd/system/rke2-agent.env", "usr/lib/systemd/system/rke2-agent.env"}},
}

// NodeProxy is the proxy the containerd of the node whose / is at hostRoot
// pulls through, from the environment files of its k3s or RKE2 unit: the
// first of k3s, k3s-agent, rke2-server and rke2-agent whose files set a
// proxy, among those enabled (etc/systemd/system/multi-user.target.wants)
// when any is. from names the files that set it. cfg is nil when
// hostRoot is "" or no file sets a proxy (NO_PROXY alone proxies
// nothing). A line that is no assignment is skipped, as systemd skips
// it. A file that exists but cannot be read (k3s's service.env is 0600,
// root's, and the tool runs as another user by default) is passed over:
// err names each, and cfg and from are then what the others say.
func NodeProxy(hostRoot string) (cfg *httpproxy.Config, from string, err error) {
	if hostRoot == "" {
		return nil, "", nil
	}
	units := nodeUnits
	var enabled []nodeUnit
	for _, u := range nodeUnits {
		if _, err := os.Lstat(filepath.Join(hostRoot, "etc/systemd/system/multi-user.target.wants", u.name+".service")); err == nil {
			enabled = append(enabled, u)
		}
	}
	if len(enabled) > 0 {
		units = enabled
	}
	var unread []error
	for _, u := range units {
		cfg, from, errs := unitProxy(hostRoot, u)
		unread = append(unread, errs...)
		if cfg != nil {
			return cfg, from, errors.Join(unread...)
		}
	}
	return nil, "", errors.Join(unread...)
}

// unitProxy is the proxy u's environment files give its containerd, and
// the files that could not be read.
func unitProxy(hostRoot string, u nodeUnit) (*httpproxy.Config, string, []error) {
	env := map[string]string{}
	setBy := map[string]string{}
	var unread []error
	for _, rel := range u.files {
		path := filepath.Join(hostRoot, rel)
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			continue // systemd's "-": a file that is not there is none
		}
		if err != nil {
			unread = append(unread, err)
			continue
		}
		for k, v := range parseEnvFile(data) {
			env[k], setBy[k] = v, path
		}
	}
	// containerd's environment: k3s's own, then each CONTAINERD_ variable
	// without its prefix (CONTAINERD_LOG_LEVEL becomes a flag)
	seen := map[string]string{}
	seenBy := map[string]string{}
	for k, v := range env {
		if !strings.HasPrefix(k, "CONTAINERD_") {
			seen[k], seenBy[k] = v, setBy[k]
		}
	}
	for k, v := range env {
		if name, ok := strings.CutPrefix(k, "CONTAINERD_"); ok && k != "CONTAINERD_LOG_LEVEL" {
			seen[name], seenBy[name] = v, setBy[k]
		}
	}
	files := map[string]bool{}
	// as httpproxy.FromEnvironment: the upper-case name, else the lower
	first := func(names ...string) string {
		for _, n := range names {
			if v := seen[n]; v != "" {
				files[seenBy[n]] = true
				return v
			}
		}
		return ""
	}
	cfg := &httpproxy.Config{
		HTTPProxy:  first("HTTP_PROXY", "http_proxy"),
		HTTPSProxy: first("HTTPS_PROXY", "https_proxy"),
		NoProxy:    first("NO_PROXY", "no_proxy"),
	}
	if cfg.HTTPProxy == "" && cfg.HTTPSProxy == "" {
		return nil, "", unread
	}
	var names []string
	for _, rel := range u.files {
		if path := filepath.Join(hostRoot, rel); files[path] {
			names = append(names, path)
		}
	}
	return cfg, strings.Join(names, ", "), unread
}

// parseEnvFile reads KEY=VALUE assignments as systemd's EnvironmentFile=
// does: blank lines and lines starting with # or ; are skipped, as is a
// line with no = or whose key is not a variable's name; whitespace around
// the key and the value is dropped; a value in single quotes is taken
// verbatim, one in double quotes with the shell's escapes (\" \\ \` \$
// and a backslash-newline), either may span lines; an unquoted value
// keeps its inner whitespace, a backslash keeps the next character and a
// trailing backslash continues the line. An "export " before the key is
// tolerated, as in a file also sourced by a shell. A later assignment of
// a key wins.
func parseEnvFile(data []byte) map[string]string {
	out := map[string]string{}
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var lines []string
	for sc.Scan() {
		lines = append(lines, strings.TrimSuffix(sc.Text(), "\r"))
	}
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		key = strings.TrimSpace(key)
		if rest, ok := strings.CutPrefix(key, "export"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			key = strings.TrimSpace(rest)
		}
		v, end, good := envValue(strings.TrimLeft(value, " \t"), lines, i)
		i = end
		if good && envName(key) {
			out[key] = v
		}
	}
	return out
}

// envValue is the value that starts with value on line i of lines, and
// the line it ends on; not good when a quote is not closed (the rest of
// the file is then no assignment).
func envValue(value string, lines []string, i int) (string, int, bool) {
	var b strings.Builder
	switch {
	case strings.HasPrefix(value, "'"):
		s := value[1:]
		for {
			if end := strings.IndexByte(s, '\''); end >= 0 {
				b.WriteString(s[:end])
				return b.String(), i, true
			}
			if i+1 >= len(lines) {
				return "", len(lines), false
			}
			b.WriteString(s + "\n")
			i++
			s = lines[i]
		}
	case strings.HasPrefix(value, `"`):
		s := value[1:]
		for {
			for j := 0; j < len(s); j++ {
				c := s[j]
				switch {
				case c == '"':
					return b.String(), i, true
				case c == '\\' && j+1 < len(s):
					if strings.IndexByte("\"\\`$", s[j+1]) >= 0 {
						b.WriteByte(s[j+1])
					} else {
						b.WriteByte(c)
						b.WriteByte(s[j+1])
					}
					j++
				case c == '\\': // a backslash-newline: the lines join
				default:
					b.WriteByte(c)
				}
			}
			if i+1 >= len(lines) {
				return "", len(lines), false
			}
			if !continued(s) {
				b.WriteByte('\n')
			}
			i++
			s = lines[i]
		}
	default:
		s := value
		for {
			for j := 0; j < len(s); j++ {
				c := s[j]
				if c == '\\' && j+1 < len(s) {
					b.WriteByte(s[j+1])
					j++
					continue
				}
				if c == '\\' { // at the end: the next line continues it
					break
				}
				b.WriteByte(c)
			}
			if !continued(s) || i+1 >= len(lines) {
				return strings.TrimRight(b.String(), " \t"), i, true
			}
			i++
			s = lines[i]
		}
	}
}

// continued: s ends in a backslash that escapes nothing.
func continued(s string) bool {
	n := 0
	for n < len(s) && s[len(s)-1-n] == '\\' {
		n++
	}
	return n%2 == 1
}

// envName: s is a variable's name systemd takes.
func envName(s string) bool {
	if s == "" || (s[0] >= '0' && s[0] <= '9') {
		return false
	}
	for _, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
