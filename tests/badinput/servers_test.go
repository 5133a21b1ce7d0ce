package badinput

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
)

// The loopback servers of the corpus: a Helm repository or a SUC channel
// that answers badly in one way.

// repoIndex lists the example chart at 1.0.0 and 2.0.0, its archives under
// charts/ relative to the repository.
const repoIndex = `apiVersion: v1
entries:
  demo-app:
  - {apiVersion: v2, name: demo-app, version: 2.0.0, urls: [charts/demo-app-2.0.0.tgz]}
  - {apiVersion: v2, name: demo-app, version: 1.0.0, urls: [charts/demo-app-1.0.0.tgz]}
`

// repo serves index (at /index.yaml) and files (at /<name>); anything else is
// a 404.
func repo(index string, files map[string]http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/index.yaml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-yaml")
		_, _ = w.Write([]byte(index))
	})
	for name, h := range files {
		mux.Handle("/"+name, h)
	}
	return mux
}

// blob answers data.
func blob(data []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(data) })
}

// status answers code with a short body, to every request.
func status(code int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(code), code)
	})
}

// redirectWithoutLocation answers 302 Found and no Location header.
func redirectWithoutLocation() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusFound) })
}

// redirect answers 302 Found to location.
func redirect(location string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", location)
		w.WriteHeader(http.StatusFound)
	})
}

// garbage answers 200 with bytes that are neither YAML nor JSON.
func garbage() http.Handler {
	return blob([]byte("\x00\x01\x02 this: is: [not an index\n\tat all: }\n"))
}

// endless streams prefix and then filler, without a Content-Length, until
// more than n bytes went out or the client hung up.
func endless(prefix string, n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("# padding the answer beyond the limit ........................\n"), 1024)
		sent, err := w.Write([]byte(prefix))
		total := int64(sent)
		for err == nil && total <= n {
			sent, err = w.Write(chunk)
			total += int64(sent)
		}
	})
}

// claims answers 200 with a Content-Length of n, sending a few bytes only.
func claims(n int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(strings.Repeat("x", 512)))
	})
}
