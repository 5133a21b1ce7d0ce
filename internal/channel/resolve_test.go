package channel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/chart-upgrader/chart-upgrader/internal/outcome"
)

func redirectTo(code int, location string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if location != "" {
			w.Header().Set("Location", location)
		}
		w.WriteHeader(code)
	}
}

func TestResolveAnswers(t *testing.T) {
	ok := func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello")) }
	tests := []struct {
		name    string
		handler http.HandlerFunc
		path    string
		want    string
	}{
		{"302 absolute Location", nil, "/v1-release/channels/stable", "v1.30.2"}, // handler set below
		{"302 relative Location, query and fragment ignored", redirectTo(http.StatusFound, "../releases/v1.2.3?arch=amd64#x"), "/v1/channels/stable", "v1.2.3"},
		{"302 path-absolute Location", redirectTo(http.StatusFound, "/releases/1.4.2"), "/c/stable", "1.4.2"},
		{"301", redirectTo(http.StatusMovedPermanently, "/r/1.0.1"), "/c/x", "1.0.1"},
		{"303", redirectTo(http.StatusSeeOther, "/r/1.0.3"), "/c/x", "1.0.3"},
		{"307", redirectTo(http.StatusTemporaryRedirect, "/r/1.0.7"), "/c/x", "1.0.7"},
		{"308", redirectTo(http.StatusPermanentRedirect, "/r/1.0.8"), "/c/x", "1.0.8"},
		{"plus becomes minus", redirectTo(http.StatusFound, "/r/v1.30.2+rke2r1"), "/c/x", "v1.30.2-rke2r1"},
		{"200: last element of the URL", ok, "/pinned/v1.5.0?ignored=yes", "v1.5.0"},
		{"204: last element of the URL, plus becomes minus", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }, "/pinned/1.5.0+k3s1", "1.5.0-k3s1"},
		{"self-redirect does not loop", nil, "/c/v2.0.0", "v2.0.0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv string
			h := tt.handler
			switch tt.name {
			case "302 absolute Location":
				h = func(w http.ResponseWriter, r *http.Request) {
					redirectTo(http.StatusFound, srv+"/v1-release/releases/v1.30.2")(w, r)
				}
			case "self-redirect does not loop":
				h = func(w http.ResponseWriter, r *http.Request) { redirectTo(http.StatusFound, r.URL.Path)(w, r) }
			}
			ts, hits := serve(t, h)
			srv = ts.URL
			got, err := Resolve(t.Context(), ts.URL+tt.path, fast())
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.EqualValues(t, 1, hits.Load(), "one request, never a followed redirect")
		})
	}
}

func TestResolveSendsSUCHeaders(t *testing.T) {
	var got atomic.Pointer[http.Header]
	ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Clone()
		got.Store(&h)
		redirectTo(http.StatusFound, "/r/1.0.0")(w, r)
	})
	opts := fast()
	opts.ClusterID, opts.CurrentVersion = "0c1a-uid", "0.9.0"
	_, err := Resolve(t.Context(), ts.URL+"/c", opts)
	require.NoError(t, err)
	h := *got.Load()
	assert.Equal(t, "0c1a-uid", h.Get(HeaderClusterID))
	assert.Equal(t, "0.9.0", h.Get(HeaderLatestVersion))
	assert.Equal(t, "chart-upgrader", h.Get("User-Agent"))

	// like SUC, empty values send no header
	_, err = Resolve(t.Context(), ts.URL+"/c", fast())
	require.NoError(t, err)
	h = *got.Load()
	assert.NotContains(t, h, HeaderClusterID)
	assert.NotContains(t, h, HeaderLatestVersion)
}

func TestResolve4xxIsBadInputNotRetried(t *testing.T) {
	for _, code := range []int{http.StatusNotFound, http.StatusForbidden, http.StatusTooManyRequests} {
		ts, hits := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", code) })
		url := ts.URL + "/v1/channels/nope"
		_, err := Resolve(t.Context(), url, fast())
		require.Error(t, err)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Equal(t, outcome.ExitBadInput, outcome.Code(err))
		assert.Contains(t, err.Error(), fmt.Sprintf(`channel URL %q: answered %d %s`, url, code, http.StatusText(code)))
		assert.EqualValues(t, 1, hits.Load())
	}
}

func TestResolveRetries5xx(t *testing.T) {
	t.Run("500 then success", func(t *testing.T) {
		var n atomic.Int64
		ts, hits := serve(t, func(w http.ResponseWriter, r *http.Request) {
			if n.Add(1) == 1 {
				http.Error(w, "boom", http.StatusInternalServerError)
				return
			}
			redirectTo(http.StatusFound, "/r/1.2.0")(w, r)
		})
		got, err := Resolve(t.Context(), ts.URL+"/c", fast())
		require.NoError(t, err)
		assert.Equal(t, "1.2.0", got)
		assert.EqualValues(t, 2, hits.Load())
	})
	t.Run("500 forever", func(t *testing.T) {
		ts, hits := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusBadGateway) })
		opts := fast()
		opts.Attempts = 4
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.Error(t, err)
		assert.NotErrorIs(t, err, outcome.ErrBadInput)
		assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
		assert.Contains(t, err.Error(), ts.URL+"/c")
		assert.Contains(t, err.Error(), "502 Bad Gateway (gave up after 4 attempts)")
		assert.EqualValues(t, 4, hits.Load())
	})
	t.Run("default is 3 attempts with backoff", func(t *testing.T) {
		ts, hits := serve(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", http.StatusServiceUnavailable) })
		opts := fast()
		opts.Backoff = 20 * time.Millisecond
		start := time.Now()
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.Error(t, err)
		assert.EqualValues(t, DefaultAttempts, hits.Load())
		assert.GreaterOrEqual(t, time.Since(start), 60*time.Millisecond, "waits 20ms then 40ms")
	})
}

func TestResolveConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + ln.Addr().String() + "/c"
	require.NoError(t, ln.Close())
	_, err = Resolve(t.Context(), url, fast())
	require.Error(t, err)
	assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
	assert.Contains(t, err.Error(), `channel URL "`+url+`"`)
	assert.Contains(t, err.Error(), "refused")
	assert.Contains(t, err.Error(), "gave up after 3 attempts")
}

func TestResolveTimeouts(t *testing.T) {
	blocked := func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }
	t.Run("per attempt", func(t *testing.T) {
		ts, hits := serve(t, blocked)
		opts := fast()
		opts.AttemptTimeout, opts.Attempts = 50*time.Millisecond, 2
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no answer within 50ms (gave up after 2 attempts)")
		assert.Equal(t, outcome.ExitFailure, outcome.Code(err), "a channel that does not answer is a failure, not a timed-out wait")
		assert.EqualValues(t, 2, hits.Load())
	})
	t.Run("overall", func(t *testing.T) {
		ts, _ := serve(t, blocked)
		opts := fast()
		opts.Timeout, opts.Attempts = 80*time.Millisecond, 10
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "no version within 80ms")
		assert.Equal(t, outcome.ExitFailure, outcome.Code(err))
	})
	t.Run("the caller's deadline", func(t *testing.T) {
		ts, _ := serve(t, blocked)
		ctx, cancel := context.WithTimeout(t.Context(), 80*time.Millisecond)
		defer cancel()
		_, err := Resolve(ctx, ts.URL+"/c", fast())
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("cancelled during backoff", func(t *testing.T) {
		ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })
		ctx, cancel := context.WithCancel(t.Context())
		opts := fast()
		opts.Backoff = time.Hour
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := Resolve(ctx, ts.URL+"/c", opts)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

func TestResolveBadAnswers(t *testing.T) {
	long := "/r/" + strings.Repeat("1", MaxVersionLength+1)
	tests := []struct {
		name          string
		handler       http.HandlerFunc
		path          string
		requireSemver bool
		want          string
	}{
		{"redirect without Location", redirectTo(http.StatusFound, ""), "/c", false, "answered 302 Found: no Location header"},
		{"Location ending in /", redirectTo(http.StatusFound, "/releases/v1.2.3/"), "/c", false, "the version is empty"},
		{"Location without path", redirectTo(http.StatusFound, "https://example.com"), "/c", false, "the version is empty"},
		{"space in version", redirectTo(http.StatusFound, "/r/v1%202"), "/c", false, `the version "v1 2" is not usable`},
		{"slash in version stays a path separator", redirectTo(http.StatusFound, "/r/v1%2F"), "/c", false, "the version is empty"},
		{"dot-dot", redirectTo(http.StatusFound, "/r/.."), "/c", false, "the version is empty"},
		{"leading dash", redirectTo(http.StatusFound, "/r/-rc1"), "/c", false, `the version "-rc1" is not usable`},
		{"control character", redirectTo(http.StatusFound, "/r/1.0%0A"), "/c", false, "is not usable"},
		{"too long", redirectTo(http.StatusFound, long), "/c", false, "129 characters long, more than 128"},
		{"not semver", redirectTo(http.StatusFound, "/r/latest"), "/c", true, `the version "latest" is not semver`},
		{"2xx on a URL ending in /", func(w http.ResponseWriter, r *http.Request) {}, "/c/", false, "the version is empty"},
		{"unexpected 3xx", redirectTo(http.StatusNotModified, "/r/1.0.0"), "/c", false, "answered 304 Not Modified, neither a redirect nor a 2xx"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, hits := serve(t, tt.handler)
			opts := fast()
			opts.RequireSemver = tt.requireSemver
			_, err := Resolve(t.Context(), ts.URL+tt.path, opts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
			assert.Contains(t, err.Error(), `channel URL "`+ts.URL+tt.path+`"`)
			assert.EqualValues(t, 1, hits.Load(), "not retried")
		})
	}
	t.Run("semver with a leading v passes", func(t *testing.T) {
		ts, _ := serve(t, redirectTo(http.StatusFound, "/r/v1.2.3+rke2r1"))
		opts := fast()
		opts.RequireSemver = true
		got, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.NoError(t, err)
		assert.Equal(t, "v1.2.3-rke2r1", got)
	})
}

func TestResolveBadURL(t *testing.T) {
	for _, url := range []string{"", " ", "ftp://example.com/c", "http://", "example.com/c", "http://a b/"} {
		_, err := Resolve(t.Context(), url, fast())
		assert.ErrorIs(t, err, outcome.ErrBadInput, "%q", url)
	}
}

func TestResolveRedactsCredentials(t *testing.T) {
	ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	url := strings.Replace(ts.URL, "http://", "http://user:s3cret@", 1) + "/c"
	_, err := Resolve(t.Context(), url, fast())
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.Contains(t, err.Error(), "user:xxxxx@")
}

func TestResolveDoesNotReadLargeBodies(t *testing.T) {
	stopped := make(chan int64, 1)
	ts, _ := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 32<<10)
		var written int64
		defer func() { stopped <- written }()
		for written < 1<<30 { // 1 GiB: reading it all would take far longer than the test
			n, err := w.Write(chunk)
			written += int64(n)
			if err != nil {
				return
			}
		}
	})
	got, err := Resolve(t.Context(), ts.URL+"/c/1.0.0", fast())
	require.NoError(t, err)
	assert.Equal(t, "1.0.0", got)
	select {
	case written := <-stopped:
		assert.Less(t, written, int64(256<<20), "the client hung up long before the end of the body")
	case <-time.After(10 * time.Second):
		t.Fatal("the server is still writing: the body was not closed")
	}
}

func TestResolveTLS(t *testing.T) {
	ts := httptestTLS(t, redirectTo(http.StatusFound, "/r/1.3.0"))
	t.Run("with the CA file", func(t *testing.T) {
		opts := fast()
		opts.CAFile = writeCA(t, ts)
		got, err := Resolve(t.Context(), ts.URL+"/c", opts)
		require.NoError(t, err)
		assert.Equal(t, "1.3.0", got)
	})
	t.Run("without it: never silently insecure", func(t *testing.T) {
		_, err := Resolve(t.Context(), ts.URL+"/c", fast())
		require.Error(t, err)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "TLS certificate not trusted")
		assert.Contains(t, err.Error(), ts.URL)
	})
	t.Run("an unreadable CA file", func(t *testing.T) {
		opts := fast()
		opts.CAFile = t.TempDir() + "/missing.pem"
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "missing.pem")
	})
	t.Run("a CA file without PEM", func(t *testing.T) {
		opts := fast()
		opts.CAFile = writeFile(t, t.TempDir()+"/ca.pem", "not a certificate")
		_, err := Resolve(t.Context(), ts.URL+"/c", opts)
		assert.ErrorIs(t, err, outcome.ErrBadInput)
		assert.Contains(t, err.Error(), "holds no PEM certificate")
	})
}

func TestRetryKeepsFinalErrors(t *testing.T) {
	calls := 0
	err := retry(t.Context(), fast().withDefaults(), "thing", func(context.Context) error {
		calls++
		return errors.New("final")
	})
	assert.EqualError(t, err, "final", "returned as it is")
	assert.Equal(t, 1, calls)
}
