package health

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The variables of a gate's expressions.
const (
	VarMetadata = "metadata"
	VarSpec     = "spec"
	VarStatus   = "status"
	VarValues   = "values"  // the merged values of the upgrade
	VarVersion  = "version" // the target chart version
)

// objectVars are the variables bound to the object's top-level fields.
var objectVars = []string{VarMetadata, VarSpec, VarStatus}

// costLimit bounds one evaluation, as the API server bounds one
// validation rule (its PerCallLimit).
const costLimit = 1000000

// Expr is one compiled expression of a gate.
type Expr struct {
	Source string
	prog   cel.Program
	// reads are the object fields the expression selects (status.phase),
	// for saying what it saw.
	reads []string
}

var (
	envOnce sync.Once
	env     *cel.Env
	envErr  error
)

// celEnv is Kubernetes' base CEL environment (its libraries, at the
// compatibility version of this build) with the gate's variables.
func celEnv() (*cel.Env, error) {
	envOnce.Do(func() {
		base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
		set, err := base.Extend(environment.VersionedOptions{
			IntroducedVersion: version.MajorMinor(1, 0),
			EnvOptions: []cel.EnvOption{
				cel.Variable(VarMetadata, cel.DynType), cel.Variable(VarSpec, cel.DynType), cel.Variable(VarStatus, cel.DynType),
				cel.Variable(VarValues, cel.DynType), cel.Variable(VarVersion, cel.StringType),
			},
		})
		if err != nil {
			envErr = fmt.Errorf("building the CEL environment: %w", err)
			return
		}
		env, envErr = set.Env(environment.StoredExpressions)
	})
	return env, envErr
}

// Compile compiles a gate expression, which must be a bool. Its error is
// CEL's own message (an undeclared reference names the variable).
func Compile(src string) (*Expr, error) { return compile(src, types.BoolType) }

// CompileString compiles an expression that must be a string (an Each's
// key).
func CompileString(src string) (*Expr, error) { return compile(src, types.StringType) }

// compile compiles src, which must give want (or dyn, checked at
// evaluation).
func compile(src string, want *types.Type) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	e, err := celEnv()
	if err != nil {
		return nil, err
	}
	checked, iss := e.Compile(src)
	if iss.Err() != nil {
		return nil, errors.New(iss.Err().Error())
	}
	if !checked.OutputType().IsExactType(want) && !checked.OutputType().IsExactType(types.DynType) {
		return nil, fmt.Errorf("the expression is a %s, not a %s", checked.OutputType(), want)
	}
	prog, err := e.Program(checked, cel.CostLimit(costLimit), cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, fmt.Errorf("building the program: %w", err)
	}
	return &Expr{Source: src, prog: prog, reads: selects(checked.NativeRep())}, nil
}

// NotOfType is an expression whose value is not of the type it must give
// (current: "status.phase", a comparison left out): the spec is wrong,
// whatever the object holds.
type NotOfType struct {
	Source string
	Value  any
	Want   string
}

func (e *NotOfType) Error() string {
	return fmt.Sprintf("the expression %q gives %s, not a %s", e.Source, short(e.Value), e.Want)
}

// eval evaluates e on act: true or false, or why it could not be
// evaluated (a field the object lacks: "no such key: phase"; a value of
// another type: *NotOfType).
func (e *Expr) eval(act map[string]any) (bool, error) {
	out, _, err := e.prog.Eval(act)
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok {
		return false, &NotOfType{Source: e.Source, Value: out.Value(), Want: "bool"}
	}
	return b, nil
}

// lacking reports whether err, an expression's error, says the object
// lacks what it reads: a field or map key ("no such key: phase"), an
// attribute, a list element ("index out of bounds: 0"). The object does
// not show it (yet), which makes the expression false, not an error; any
// other error (division by zero, "no such overload", a regular expression
// that does not parse, the cost limit) is the expression's own.
func lacking(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	for _, p := range []string{"no such key: ", "no such attribute", "index out of bounds: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// evalString evaluates a string expression on act.
func (e *Expr) evalString(act map[string]any) (string, error) {
	out, _, err := e.prog.Eval(act)
	if err != nil {
		return "", err
	}
	s, ok := out.Value().(string)
	if !ok {
		return "", &NotOfType{Source: e.Source, Value: out.Value(), Want: "string"}
	}
	return s, nil
}

// selects lists the paths of the object fields an expression selects,
// outermost only (status.phase, not status too), sorted.
func selects(a *ast.AST) []string {
	seen := map[string]bool{}
	var walk func(e ast.Expr) (string, bool)
	// path is the dotted path e selects from an object variable, if any
	walk = func(e ast.Expr) (string, bool) {
		switch e.Kind() {
		case ast.IdentKind:
			name := e.AsIdent()
			for _, v := range objectVars {
				if v == name {
					return name, true
				}
			}
		case ast.SelectKind:
			if p, ok := walk(e.AsSelect().Operand()); ok {
				return p + "." + e.AsSelect().FieldName(), true
			}
		}
		return "", false
	}
	ast.PreOrderVisit(a.Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if e.Kind() != ast.SelectKind {
			return
		}
		if p, ok := walk(e); ok {
			seen[p] = true
		}
	}))
	var out []string
	for p := range seen {
		covered := false
		for q := range seen {
			if q != p && strings.HasPrefix(q, p+".") {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}
