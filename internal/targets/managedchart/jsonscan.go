package managedchart

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// A small JSON reader for cutting large members out of objects before
// they are decoded (a Bundle's chart files, hundreds of kilobytes sent
// again with every status write), as the API server sends them: what it
// skips is stepped over, strings with a vectorised search for their
// closing quote, without being decoded or built. jsonStream cuts a stream into values (the events of a watch, the
// items of a list) holding one at a time; jsonReader reads the fields of
// one. They check the structure they walk (braces, colons, commas, the
// types of the fields they pick), not every byte of what they skip: the
// input is the API server's JSON.

// maxJSONValue bounds one value of a stream: a Bundle of a large chart is
// a few megabytes.
const maxJSONValue = 64 << 20

var errJSONEnd = errors.New("unexpected end of JSON input")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// isDelim reports whether c ends a number or a literal.
func isDelim(c byte) bool { return isSpace(c) || c == ',' || c == '}' || c == ']' || c == ':' }

// stringEnd returns the index just past the closing quote of the string
// whose contents start at data[i]; -1 when data ends first.
func stringEnd(data []byte, i int) int {
	for i <= len(data) {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return -1
		}
		b := bytes.IndexByte(data[i:i+q], '\\')
		if b < 0 {
			return i + q + 1
		}
		i += b + 2 // past the escaped character
	}
	return -1
}

// scan steps over the value that starts at data[i] (not a space), or goes
// on with one whose containers are depth deep at data[i]. It returns where
// it stopped and the depth there; done when the value ended there. Not
// done: data ended first (a number or a literal at depth 0 may end with
// data).
func scan(data []byte, i, depth int) (next, depthAt int, done bool, err error) {
	for i < len(data) {
		switch c := data[i]; c {
		case '"':
			e := stringEnd(data, i+1)
			if e < 0 {
				return i, depth, false, nil // from the opening quote again
			}
			i = e
		case '{', '[':
			depth++
			i++
			continue
		case '}', ']':
			if depth == 0 {
				return i, depth, false, fmt.Errorf("unexpected %q", c)
			}
			depth--
			i++
		default:
			if depth > 0 {
				i++
				continue
			}
			j := i
			for j < len(data) && !isDelim(data[j]) {
				j++
			}
			if j == len(data) || j == i {
				if j == i {
					return i, depth, false, fmt.Errorf("unexpected %q", c)
				}
				return i, depth, false, nil
			}
			return j, depth, true, nil
		}
		if depth == 0 {
			return i, depth, true, nil
		}
	}
	return i, depth, false, nil
}

// jsonStream cuts the JSON read from r into values and punctuation,
// holding one value at a time.
type jsonStream struct {
	r   io.Reader
	buf []byte // unread: buf[off:]
	off int
	eof bool
}

func newJSONStream(r io.Reader) *jsonStream {
	return &jsonStream{r: r, buf: make([]byte, 0, 64<<10)}
}

// fill moves buf[keep:] to the front (keep ≤ off) and reads more; it
// returns how far the kept bytes moved. At the end of the input it returns
// io.EOF.
func (s *jsonStream) fill(keep int) (int, error) {
	if s.eof {
		return 0, io.EOF
	}
	n := copy(s.buf[:cap(s.buf)], s.buf[keep:])
	s.buf, s.off = s.buf[:n], s.off-keep
	if n == cap(s.buf) {
		if n >= maxJSONValue {
			return 0, fmt.Errorf("a JSON value of more than %d bytes", maxJSONValue)
		}
		s.buf = append(make([]byte, 0, 2*cap(s.buf)), s.buf...)
	}
	for {
		m, err := s.r.Read(s.buf[n:cap(s.buf)])
		s.buf = s.buf[:n+m]
		if err == io.EOF {
			s.eof = true
			if m == 0 {
				return keep, io.EOF
			}
			return keep, nil
		}
		if err != nil {
			return keep, err
		}
		if m > 0 {
			return keep, nil
		}
	}
}

// peek returns the next byte that is not a space, unread; io.EOF at the
// end of the input.
func (s *jsonStream) peek() (byte, error) {
	for {
		for s.off < len(s.buf) {
			if c := s.buf[s.off]; !isSpace(c) {
				return c, nil
			}
			s.off++
		}
		if _, err := s.fill(s.off); err != nil {
			return 0, err
		}
	}
}

// punct reads the punctuation c.
func (s *jsonStream) punct(c byte) error {
	got, err := s.peek()
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	if err != nil {
		return err
	}
	if got != c {
		return fmt.Errorf("want %q, have %q", c, got)
	}
	s.off++
	return nil
}

// value returns the next value, valid until the next call; io.EOF when
// the input ended before it, io.ErrUnexpectedEOF within it.
func (s *jsonStream) value() ([]byte, error) {
	if _, err := s.peek(); err != nil {
		return nil, err
	}
	start, i, depth := s.off, s.off, 0
	for {
		next, d, done, err := scan(s.buf, i, depth)
		if err != nil {
			return nil, err
		}
		if done {
			s.off = next
			return s.buf[start:next], nil
		}
		moved, err := s.fill(start)
		start, i, depth = start-moved, next-moved, d
		if err == io.EOF {
			if depth == 0 && s.buf[i] != '"' { // a number or literal ending with the input
				s.off = len(s.buf)
				return s.buf[start:], nil
			}
			return nil, io.ErrUnexpectedEOF
		}
		if err != nil {
			return nil, err
		}
	}
}

// jsonReader reads one complete JSON value held in data.
type jsonReader struct {
	data []byte
	i    int
}

// next returns the next byte that is not a space, unread; 0 at the end.
func (r *jsonReader) next() byte {
	for r.i < len(r.data) {
		if c := r.data[r.i]; !isSpace(c) {
			return c
		}
		r.i++
	}
	return 0
}

func (r *jsonReader) punct(c byte) error {
	switch got := r.next(); got {
	case c:
		r.i++
		return nil
	case 0:
		return errJSONEnd
	default:
		return fmt.Errorf("want %q, have %q at offset %d", c, got, r.i)
	}
}

// raw steps over the next value and returns it.
func (r *jsonReader) raw() ([]byte, error) {
	if r.next() == 0 {
		return nil, errJSONEnd
	}
	start := r.i
	next, depth, done, err := scan(r.data, r.i, 0)
	if err != nil {
		return nil, err
	}
	if !done {
		if depth != 0 || r.data[next] == '"' {
			return nil, errJSONEnd
		}
		next = len(r.data) // a number or literal ending with the input
	}
	r.i = next
	return r.data[start:next], nil
}

func (r *jsonReader) skip() error {
	_, err := r.raw()
	return err
}

// object reads an object, calling field with each key (valid during the
// call); field must read the value. A value that is not an object is
// skipped, as an absent one.
func (r *jsonReader) object(field func(key []byte) error) error {
	if r.next() != '{' {
		return r.skip()
	}
	r.i++
	if r.next() == '}' {
		r.i++
		return nil
	}
	for {
		key, err := r.rawString()
		if err != nil {
			return err
		}
		if err := r.punct(':'); err != nil {
			return err
		}
		if err := field(key); err != nil {
			return err
		}
		switch r.next() {
		case ',':
			r.i++
		case '}':
			r.i++
			return nil
		case 0:
			return errJSONEnd
		default:
			return fmt.Errorf("want ',' or '}', have %q at offset %d", r.data[r.i], r.i)
		}
	}
}

// rawString reads a string and returns its contents, unescaped (valid
// until the next read when it held no escape).
func (r *jsonReader) rawString() ([]byte, error) {
	if err := r.punct('"'); err != nil {
		return nil, err
	}
	start := r.i
	end := stringEnd(r.data, start)
	if end < 0 {
		return nil, errJSONEnd
	}
	r.i = end
	s := r.data[start : end-1]
	if bytes.IndexByte(s, '\\') < 0 && utf8.Valid(s) {
		return s, nil
	}
	var out string // escapes or invalid UTF-8: as encoding/json reads them
	if err := json.Unmarshal(r.data[start-1:end], &out); err != nil {
		return nil, err
	}
	return []byte(out), nil
}

// str reads a string; a value of another type is skipped and reads as "".
func (r *jsonReader) str() (string, error) {
	if r.next() != '"' {
		return "", r.skip()
	}
	s, err := r.rawString()
	return string(s), err
}

// cutJSON returns the JSON object data without the members at the paths
// cuts (keys from the top; a path through a value that is not an object
// cuts nothing). What is kept is copied as it is.
func cutJSON(data []byte, cuts [][]string) ([]byte, error) {
	out := make([]byte, 0, len(data))
	r := &jsonReader{data: data}
	if err := cutObject(r, &out, cuts); err != nil {
		return nil, err
	}
	if r.next() != 0 {
		return nil, fmt.Errorf("data after the JSON value at offset %d", r.i)
	}
	return out, nil
}

func cutObject(r *jsonReader, out *[]byte, cuts [][]string) error {
	if r.next() != '{' {
		v, err := r.raw()
		*out = append(*out, v...)
		return err
	}
	r.i++
	*out = append(*out, '{')
	for read, wrote := 0, 0; ; read++ {
		c := r.next()
		if c == '}' {
			r.i++
			*out = append(*out, '}')
			return nil
		}
		if read > 0 {
			if c != ',' {
				return fmt.Errorf("want ',' or '}' at offset %d", r.i)
			}
			r.i++
			r.next()
		}
		start := r.i
		key, err := r.rawString()
		if err != nil {
			return err
		}
		quoted := r.data[start:r.i]
		if err := r.punct(':'); err != nil {
			return err
		}
		drop, sub := false, [][]string(nil)
		for _, c := range cuts {
			if c[0] == string(key) {
				if len(c) == 1 {
					drop = true
				} else {
					sub = append(sub, c[1:])
				}
			}
		}
		if drop {
			if err := r.skip(); err != nil {
				return err
			}
			continue
		}
		if wrote > 0 {
			*out = append(*out, ',')
		}
		wrote++
		*out = append(append(*out, quoted...), ':')
		if len(sub) > 0 {
			err = cutObject(r, out, sub)
		} else {
			var v []byte
			v, err = r.raw()
			*out = append(*out, v...)
		}
		if err != nil {
			return err
		}
	}
}
