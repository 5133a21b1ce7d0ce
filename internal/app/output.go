package app

import (
	"bytes"
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

// WriteObject prints v on w as indented JSON (format "json") or as YAML
// ("yaml", by its JSON field names, as kubectl prints objects): the one
// writer of every command's -o json and -o yaml.
func WriteObject(w io.Writer, format string, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // <redacted> stays readable
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	data := buf.Bytes()
	if format == "yaml" {
		var err error
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
	}
	_, err := w.Write(data)
	return err
}
