package values

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/mikefarah/yq/v4/pkg/yqlib"
)

// Expr is a yq expression (github.com/mikefarah/yq/v4), checked when parsed.
type Expr struct {
	text string
}

func (e *Expr) String() string { return e.text }

var yqInit sync.Once

func initYQ() {
	yqInit.Do(func() {
		// yq logs to stderr at warning level by default; its errors reach us
		// as returned errors, so keep its logger quiet.
		yqlib.GetLogger().SetLevel(slog.LevelError + 1)
		yqlib.InitExpressionParser()
	})
}

// ParseExpr checks that text is a yq expression.
func ParseExpr(text string) (*Expr, error) {
	if strings.TrimSpace(text) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	initYQ()
	if _, err := yqlib.ExpressionParser.ParseExpression(text); err != nil {
		return nil, fmt.Errorf("yq expression %q does not parse: %w", text, err)
	}
	return &Expr{text: text}, nil
}

// errNoResult means the expression matched nothing.
var errNoResult = errors.New("the expression gave no result")

// Eval runs the expression on one document and returns its single result,
// decoded like the values (numbers normalised). No result → errNoResult.
func (e *Expr) Eval(doc any) (any, error) {
	initYQ()
	in, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding input of %q: %w", e.text, err)
	}
	enc := yqlib.NewJSONEncoder(yqlib.JsonPreferences{Indent: 0})
	prefs := yqlib.NewDefaultYamlPreferences()
	out, err := yqlib.NewStringEvaluator().Evaluate(e.text, string(in), enc, yqlib.NewYamlDecoder(prefs))
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", e.text, err)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var results []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the result of %q: %w", e.text, err)
		}
		results = append(results, normalize(v))
	}
	switch len(results) {
	case 0:
		return nil, errNoResult
	case 1:
		return results[0], nil
	default:
		return nil, fmt.Errorf("%q gave %d results, want one", e.text, len(results))
	}
}
