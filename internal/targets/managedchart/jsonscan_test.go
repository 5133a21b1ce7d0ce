package managedchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzReadBDIsParseBundleDeployment: for any JSON object, readBD reads
// what ParseBundleDeployment reads of the same object decoded into a map
// (the way the dynamic client decodes it), and the metadata the informer
// keys it by. On anything else it returns, without a panic.
func FuzzReadBDIsParseBundleDeployment(f *testing.F) {
	full, err := json.Marshal(bundleDeployment().Object)
	require.NoError(f, err)
	for _, seed := range []string{
		string(full),
		`{"metadata":{"name":"a","namespace":"n"},"spec":{"deploymentID":"s-1"},"status":{"appliedDeploymentID":"s-1","ready":true}}`,
		`{"metadata":{"name":"a\"b\\c\u00e9","namespace":7},"status":{"ready":"true","nonReadyStatus":[1,null,{"kind":"Pod","summary":{"message":["x",2,"y"]}}]}}`,
		`{"status":{"ready":true},"status":{"appliedDeploymentID":"x"},"metadata":null,"spec":[]}`,
		`{"status":{"nonReadyStatus":[{"name":"a","summary":{"state":"s"},"summary":{"message":["m"]}}]}}`,
		"{\"metadata\":{\"name\":\"\xff\xfe\"}}",
		`[1,2]`, `{"a":`, `{"status":{"ready":tru}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readBD(&jsonReader{data: data})
		var m map[string]any
		if !json.Valid(data) || json.Unmarshal(data, &m) != nil || m == nil {
			return // only no panic
		}
		require.NoError(t, err, "%s", data)
		u := &unstructured.Unstructured{Object: m}
		assert.Equal(t, ParseBundleDeployment(u), got.BD, "%s", data)
		assert.Equal(t, u.GetName(), got.Name)
		assert.Equal(t, u.GetNamespace(), got.Namespace)
		assert.Equal(t, u.GetResourceVersion(), got.ResourceVersion)
		assert.Equal(t, u.GetUID(), got.UID)
	})
}

// FuzzJSONStreamCutsLikeADecoder: a stream of JSON values is cut into the
// values encoding/json's Decoder reads, however the reads split it.
func FuzzJSONStreamCutsLikeADecoder(f *testing.F) {
	for _, seed := range []string{
		`{"type":"ADDED","object":{"a":[1,2,{"b":"c\"}"}]}}` + "\n" + `{"type":"DELETED","object":{}}`,
		` "x\\" 12 true null [] {} -1.5e3 [{"a":"]"}]`,
		"{\"k\":\"\\u00e9\\n\"}\r\n\t[\"\\\\\"]",
		`12`, `"abc`, `{"a":1`, `]`, `tru`,
	} {
		f.Add([]byte(seed), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, chunk uint8) {
		var want [][]byte
		dec := json.NewDecoder(bytes.NewReader(data))
		var decErr error
		for {
			var raw json.RawMessage
			if decErr = dec.Decode(&raw); decErr != nil {
				break
			}
			if end := int(dec.InputOffset()); !bytes.ContainsAny(raw[:1], `{["`) && end < len(data) && !isDelim(data[end]) {
				return // numbers run together ("0" "0" of "00"): not a stream the API server sends
			}
			want = append(want, raw)
		}
		var r io.Reader = bytes.NewReader(data)
		if chunk%2 == 1 {
			r = iotest.OneByteReader(r)
		} else {
			r = iotest.HalfReader(r)
		}
		s := &jsonStream{r: r, buf: make([]byte, 0, 1+int(chunk)%8)}
		var got [][]byte
		var err error
		for {
			var v []byte
			if v, err = s.value(); err != nil {
				break
			}
			got = append(got, bytes.Clone(v))
		}
		if decErr != io.EOF {
			return // not JSON: only no panic, and no value before the bad one is made up
		}
		require.Equal(t, io.EOF, err, "%q", data)
		require.Len(t, got, len(want), "%q", data)
		for i := range want {
			assert.Equal(t, string(want[i]), string(got[i]), "%q", data)
			assert.True(t, json.Valid(got[i]))
		}
	})
}

func TestJSONStreamErrors(t *testing.T) {
	for in, want := range map[string]error{
		``:          io.EOF,
		`  `:        io.EOF,
		`{"a":1`:    io.ErrUnexpectedEOF,
		`"abc`:      io.ErrUnexpectedEOF,
		`[1,2] [3,`: io.ErrUnexpectedEOF,
	} {
		s := newJSONStream(bytes.NewReader([]byte(in)))
		var err error
		for err == nil {
			_, err = s.value()
		}
		assert.Equal(t, want, err, "%q", in)
	}
	boom := errors.New("connection reset")
	s := newJSONStream(iotest.ErrReader(boom))
	_, err := s.value()
	assert.Equal(t, boom, err, "the connection's error as it is")
}
