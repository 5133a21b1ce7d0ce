// Package image checks the container image's build without a Docker
// engine: the Makefile's image-binary builds exactly what the Dockerfile's
// build stage builds, the binary is static (the final stage is FROM
// scratch), and the final stage copies only the binary and CA certificates.
// scripts/image-check goes further with buildah when it is installed.
package image

import (
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/tests/testenv"
)

func read(t *testing.T, name string) string {
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(root, name))
	require.NoError(t, err)
	return string(data)
}

// buildLine joins a command continued with backslashes into one line.
func buildLine(t *testing.T, text, marker string) string {
	t.Helper()
	joined := strings.ReplaceAll(text, "\\\n", " ")
	for _, l := range strings.Split(joined, "\n") {
		if strings.Contains(l, marker) {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	t.Fatalf("no line with %q", marker)
	return ""
}

var ldflagsRe = regexp.MustCompile(`-ldflags ["']([^"']+)["']`)

func TestImageBinaryIsBuiltAsTheDockerfileBuildsIt(t *testing.T) {
	docker := buildLine(t, read(t, "Dockerfile"), "go build")
	make := buildLine(t, read(t, "Makefile"), "-o dist/chart-upgrader")
	for _, line := range []string{docker, make} {
		assert.Contains(t, line, "CGO_ENABLED=0")
		assert.Contains(t, line, "-trimpath")
		assert.Contains(t, line, "./cmd/chart-upgrader")
	}
	norm := func(s string) string {
		m := ldflagsRe.FindStringSubmatch(s)
		require.NotNil(t, m, s)
		return strings.NewReplacer("${VERSION}", "V", "$(VERSION)", "V").Replace(m[1])
	}
	assert.Equal(t, norm(docker), norm(make), "the ldflags differ")
}

func TestFinalStageIsScratchWithTheBinaryAndCAs(t *testing.T) {
	text := read(t, "Dockerfile")
	final := text[strings.LastIndex(text, "\nFROM "):]
	assert.True(t, strings.HasPrefix(final, "\nFROM scratch"), "the final stage is FROM scratch")
	var copies []string
	for _, l := range strings.Split(final, "\n") {
		if strings.HasPrefix(l, "COPY ") {
			copies = append(copies, l)
		}
	}
	assert.Equal(t, []string{
		"COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt",
		"COPY --from=build /out/chart-upgrader /chart-upgrader",
	}, copies)
	assert.Contains(t, final, `ENTRYPOINT ["/chart-upgrader"]`)
}

// buildRelease builds the binary as the image does (tags: none, or the
// given build tags) and returns its path.
func buildRelease(t *testing.T, tags ...string) string {
	t.Helper()
	root, err := testenv.RepoRoot()
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "chart-upgrader")
	args := []string{"build", "-trimpath", "-ldflags",
		"-s -w -X github.com/chart-upgrader/chart-upgrader/internal/cli.Version=v9.9.9-test", "-o", out}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	cmd := exec.Command("go", append(args, "./cmd/chart-upgrader")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, string(b))
	return out
}

// seamMarks are names only the test seams bring into a binary (function
// names stay in a stripped Go binary, for stack traces).
var seamMarks = []string{"CHART_UPGRADER_TEST_CRASH_AFTER", "internal/app.seamsOf", "internal/app.crashJournal", "internal/app.(*beforeApply)"}

// TestReleaseBinaryHasNoTestSeams: the crash switch and the transport and
// before-apply seams are built only with -tags testseams. The control
// build with the tag shows the marks are there to be found.
func TestReleaseBinaryHasNoTestSeams(t *testing.T) {
	release, err := os.ReadFile(buildRelease(t))
	require.NoError(t, err)
	seamed, err := os.ReadFile(buildRelease(t, "testseams"))
	require.NoError(t, err)
	for _, m := range seamMarks {
		assert.True(t, bytes.Contains(seamed, []byte(m)), "control: the testseams build lacks %q", m)
		assert.False(t, bytes.Contains(release, []byte(m)), "the release binary holds %q", m)
	}
}

func TestImageBinaryIsStaticAndVersioned(t *testing.T) {
	out := buildRelease(t)
	f, err := elf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "the binary needs a dynamic loader: it cannot run FROM scratch")
	}
	libs, _ := f.ImportedLibraries()
	assert.Empty(t, libs)
	v, err := exec.Command(out, "--version").Output()
	require.NoError(t, err)
	assert.Equal(t, "chart-upgrader version v9.9.9-test\n", string(v))
}
