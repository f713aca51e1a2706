package params

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// printer renders the library's own messages for error kinds we do not
// rephrase.
var printer = message.NewPrinter(language.English)

// FieldError is one problem with one field. Field is a dotted path into the
// parameters ("target.port", "items.0"); empty means the object as a whole.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// ValidationError lists what is wrong with a set of parameters, one entry per
// field, sorted by field so responses are stable.
type ValidationError struct {
	Fields []FieldError
}

// Error joins the fields: "invalid parameters: seconds: must be number, got
// string; url: is required".
func (e *ValidationError) Error() string {
	return "invalid parameters: " + JoinFields(e.Fields)
}

// JoinFields renders field errors as "field: message; field: message" (a
// field-less entry is just its message). Shared with the packs package so
// both kinds of error read alike.
func JoinFields(fields []FieldError) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		if f.Field == "" {
			parts[i] = f.Message
		} else {
			parts[i] = f.Field + ": " + f.Message
		}
	}
	return strings.Join(parts, "; ")
}

// rankedError is a FieldError with a preference used to pick the single
// message shown for a field that failed several keywords.
type rankedError struct {
	FieldError
	rank int
}

// fieldErrors flattens the library's error tree into one message per field.
// For a field that failed several ways, "is required" beats a type error,
// which beats everything else: fixing the first usually fixes the rest.
func fieldErrors(ve *jsonschema.ValidationError) []FieldError {
	var all []rankedError
	collect(ve, &all)
	slices.SortStableFunc(all, func(a, b rankedError) int {
		if c := strings.Compare(a.Field, b.Field); c != 0 {
			return c
		}
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return strings.Compare(a.Message, b.Message)
	})
	var out []FieldError
	for _, e := range all {
		if len(out) > 0 && out[len(out)-1].Field == e.Field {
			continue
		}
		out = append(out, e.FieldError)
	}
	return out
}

// collect walks the error tree. Combinators whose branches are alternatives
// (anyOf, oneOf) yield one message at their own location instead of every
// branch's complaints, which would contradict each other.
func collect(ve *jsonschema.ValidationError, out *[]rankedError) {
	path := ve.InstanceLocation
	add := func(field []string, msg string, rank int) {
		*out = append(*out, rankedError{FieldError{Field: strings.Join(field, "."), Message: msg}, rank})
	}
	switch k := ve.ErrorKind.(type) {
	case *kind.Group, *kind.Schema, *kind.Reference, *kind.AllOf:
		for _, c := range ve.Causes {
			collect(c, out)
		}
	case *kind.AnyOf:
		add(path, "does not match any of the allowed forms", 2)
	case *kind.OneOf:
		if len(k.Subschemas) > 1 {
			add(path, "matches more than one of the allowed forms", 2)
		} else {
			add(path, "does not match any of the allowed forms", 2)
		}
	case *kind.Required:
		for _, p := range k.Missing {
			add(append(slices.Clone(path), p), "is required", 0)
		}
	case *kind.DependentRequired:
		for _, p := range k.Missing {
			add(append(slices.Clone(path), p), fmt.Sprintf("is required when %s is present", k.Prop), 0)
		}
	case *kind.Dependency:
		for _, p := range k.Missing {
			add(append(slices.Clone(path), p), fmt.Sprintf("is required when %s is present", k.Prop), 0)
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			add(append(slices.Clone(path), p), "is not allowed", 2)
		}
	case *kind.Type:
		add(path, fmt.Sprintf("must be %s, got %s", strings.Join(k.Want, " or "), k.Got), 1)
	default:
		if len(ve.Causes) > 0 {
			for _, c := range ve.Causes {
				collect(c, out)
			}
			return
		}
		add(path, leafMessage(ve.ErrorKind), 2)
	}
}

// leafMessage phrases a single keyword failure for a user filling in a form.
func leafMessage(ek jsonschema.ErrorKind) string {
	switch k := ek.(type) {
	case *kind.Enum:
		vals := make([]string, len(k.Want))
		for i, w := range k.Want {
			vals[i] = jsonText(w)
		}
		return "must be one of " + strings.Join(vals, ", ")
	case *kind.Const:
		return "must be " + jsonText(k.Want)
	case *kind.Minimum:
		return "must be >= " + ratText(k.Want)
	case *kind.Maximum:
		return "must be <= " + ratText(k.Want)
	case *kind.ExclusiveMinimum:
		return "must be > " + ratText(k.Want)
	case *kind.ExclusiveMaximum:
		return "must be < " + ratText(k.Want)
	case *kind.MultipleOf:
		return "must be a multiple of " + ratText(k.Want)
	case *kind.MinLength:
		return fmt.Sprintf("must be at least %d characters long", k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("must be at most %d characters long", k.Want)
	case *kind.Pattern:
		return fmt.Sprintf("must match pattern %s", k.Want)
	case *kind.Format:
		return "must be a valid " + k.Want
	case *kind.MinItems:
		return fmt.Sprintf("must have at least %d items", k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("must have at most %d items", k.Want)
	case *kind.UniqueItems:
		return "must not contain duplicate items"
	case *kind.MinProperties:
		return fmt.Sprintf("must have at least %d properties", k.Want)
	case *kind.MaxProperties:
		return fmt.Sprintf("must have at most %d properties", k.Want)
	case *kind.FalseSchema:
		return "is not allowed"
	case *kind.Not:
		return "matches a form that is not allowed"
	}
	return ek.LocalizedString(printer)
}

// leaves returns the innermost errors of a tree; used for schema compile
// errors, where the library's wrapping adds nothing for the reader.
func leaves(ve *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(ve.Causes) == 0 {
		return []*jsonschema.ValidationError{ve}
	}
	var out []*jsonschema.ValidationError
	for _, c := range ve.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

// jsonText renders a schema value as JSON for messages.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// ratText prints a bound as a decimal number rather than big.Rat's "1/2".
func ratText(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	f, _ := r.Float64()
	return strconv.FormatFloat(f, 'g', -1, 64)
}
