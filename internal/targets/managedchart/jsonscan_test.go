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
)

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

// FuzzCutJSONIsDecodeThenDelete: an object cut by cutJSON decodes to
// the object decoded whole with the cut members deleted.
func FuzzCutJSONIsDecodeThenDelete(f *testing.F) {
	for _, seed := range []string{
		`{"metadata":{"name":"a","managedFields":[{"x":1}]},"spec":{"resources":[1],"helm":{}},"status":{"a":[{}]}}`,
		`{"spec":[],"metadata":"x","a":1,"a":{"b":2}}`,
		`{ "metadata" : { "managedFields" : null , "n" : "\u0041" } , "spec" : { } }`,
		`{}`, `[]`, `{"a":}`,
	} {
		f.Add([]byte(seed))
	}
	cuts := [][]string{{"metadata", "managedFields"}, {"spec", "resources"}, {"status"}, {"a", "b"}}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := cutJSON(data, cuts)
		var want map[string]any
		if !json.Valid(data) || json.Unmarshal(data, &want) != nil || want == nil {
			return // only no panic
		}
		require.NoError(t, err, "%s", data)
		for _, c := range cuts {
			m := want
			for _, k := range c[:len(c)-1] {
				m, _ = m[k].(map[string]any)
			}
			delete(m, c[len(c)-1])
		}
		var have map[string]any
		require.NoError(t, json.Unmarshal(got, &have), "%s → %s", data, got)
		assert.Equal(t, want, have, "%s → %s", data, got)
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
