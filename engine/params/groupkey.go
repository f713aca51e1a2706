package params

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
)

// maxExactFloatInt is 2^53: integers below it print identically as float64,
// so only larger ones need the exact decimal form.
var maxExactFloatInt = new(big.Rat).SetInt64(1 << 53)

// GroupKey returns the admission queue key for an action's group_by paths:
// "" when groupBy is empty, otherwise the compact JSON array of the values in
// order, a missing path giving null, e.g. `["db1",null]`.
//
// The key decides which FIFO queue an execution joins, so equal values must
// always give equal keys: numbers are canonical (5, 5.0 and json.Number("5")
// are one group) and object keys are sorted. Paths are dotted ("target.port");
// a numeric segment indexes into an array ("hosts.0").
func GroupKey(groupBy []string, params map[string]any) string {
	if len(groupBy) == 0 {
		return ""
	}
	vals := make([]any, len(groupBy))
	for i, path := range groupBy {
		vals[i] = canonical(lookup(params, path))
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keys are shown in the UI; keep "<" readable
	if err := enc.Encode(vals); err != nil {
		// canonical leaves only JSON types, so this is unreachable; still,
		// a key must never be empty for a grouped action.
		return fmt.Sprintf("%q", fmt.Sprint(vals))
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// lookup follows a dotted path; anything absent or not traversable is nil.
func lookup(params map[string]any, path string) any {
	var cur any = params
	for seg := range strings.SplitSeq(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}

// canonical rewrites numbers into one representation per value so that the
// marshalled key does not depend on how the number was decoded.
func canonical(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = canonical(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = canonical(e)
		}
		return out
	case nil, bool, string:
		return v
	case json.Number, float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		r, ok := new(big.Rat).SetString(fmt.Sprint(v))
		if !ok {
			return fmt.Sprint(v)
		}
		if r.IsInt() && new(big.Rat).Abs(r).Cmp(maxExactFloatInt) >= 0 {
			return json.Number(r.Num().String())
		}
		f, _ := r.Float64()
		return f
	default:
		// Typed Go values (structs, []string) are canonicalised via JSON.
		if n, err := normalize(v); err == nil {
			return canonical(n)
		}
		return fmt.Sprint(v)
	}
}
