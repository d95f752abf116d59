package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

// ReadValues parses a values file as Helm's chartutil.ReadValues does: through
// sigs.k8s.io/yaml, so numbers become float64 (a template must convert them
// with int/int64 before comparing or printing large ones) and YAML 1.1
// booleans (yes/no/on/off) are booleans.
func ReadValues(data []byte) (map[string]interface{}, error) {
	vals := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		return nil, err
	}
	if vals == nil {
		vals = map[string]interface{}{}
	}
	return vals, nil
}

// mergeMaps merges b into a copy of a, b winning; nested maps merge (Helm's
// merge of successive -f files).
func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(a))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if vm, ok := v.(map[string]interface{}); ok {
			if bv, ok := out[k]; ok {
				if bvm, ok := bv.(map[string]interface{}); ok {
					out[k] = mergeMaps(bvm, vm)
					continue
				}
			}
		}
		out[k] = v
	}
	return out
}

// coalesce returns the user values laid over the chart defaults, as Helm's
// chartutil.CoalesceValues: nested maps merge, user values win, and a user
// null deletes the default.
func coalesce(defaults, user map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range user {
		out[k] = v
	}
	for k, dv := range defaults {
		uv, present := out[k]
		if !present {
			out[k] = deepCopy(dv)
			continue
		}
		if uv == nil {
			delete(out, k)
			continue
		}
		um, uok := uv.(map[string]interface{})
		dm, dok := dv.(map[string]interface{})
		if uok && dok {
			out[k] = coalesce(dm, um)
		}
	}
	return out
}

func deepCopy(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		m := make(map[string]interface{}, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []interface{}:
		s := make([]interface{}, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	default:
		return v
	}
}

// validateSchema checks the coalesced values against values.schema.json with
// the library and conversion Helm 3 uses (gojsonschema; values -> YAML -> JSON).
func validateSchema(chartName string, schema []byte, values map[string]interface{}) error {
	y, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		return err
	}
	if bytes.Equal(j, []byte("null")) {
		j = []byte("{}")
	}
	result, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(j))
	if err != nil {
		return fmt.Errorf("values.schema.json: %w", err)
	}
	if result.Valid() {
		return nil
	}
	var sb strings.Builder
	sb.WriteString("values don't meet the specifications of the schema(s) in the following chart(s):\n")
	sb.WriteString(chartName + ":\n")
	for _, e := range result.Errors() {
		sb.WriteString(fmt.Sprintf("- %s\n", e))
	}
	return fmt.Errorf("%s", sb.String())
}

// parseSet applies one --set (or --set-string when asString) argument to
// vals, following Helm's strvals: comma-separated key=value pairs, dotted
// keys, list indexes key[0], lists {a,b}, backslash-escaped commas; values
// typed as Helm types them (true/false, null, int64, else string).
func parseSet(arg string, vals map[string]interface{}, asString bool) error {
	for _, pair := range splitUnescaped(arg, ',') {
		eq := strings.IndexByte(pair, '=')
		if eq < 0 {
			return fmt.Errorf("key %q has no value", pair)
		}
		key, raw := pair[:eq], pair[eq+1:]
		var value interface{}
		if !asString && strings.HasPrefix(raw, "{") && strings.HasSuffix(raw, "}") {
			var list []interface{}
			inner := raw[1 : len(raw)-1]
			if inner != "" {
				for _, item := range strings.Split(inner, ";") {
					list = append(list, typedVal(item, false))
				}
			}
			value = list
		} else {
			value = typedVal(strings.ReplaceAll(raw, `\,`, ","), asString)
		}
		if err := setPath(vals, splitKey(key), value); err != nil {
			return fmt.Errorf("--set %s: %w", pair, err)
		}
	}
	return nil
}

// splitUnescaped splits on sep outside braces and not preceded by a backslash;
// commas inside {a,b} lists are turned into ';' for the list parser.
func splitUnescaped(s string, sep byte) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == sep:
			cur.WriteString(`\,`)
			i++
		case c == '{':
			depth++
			cur.WriteByte(c)
		case c == '}':
			depth--
			cur.WriteByte(c)
		case c == sep && depth > 0:
			cur.WriteByte(';')
		case c == sep:
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

type pathElem struct {
	key   string
	index int // -1 for a map key
}

func splitKey(key string) []pathElem {
	var out []pathElem
	for _, part := range splitUnescapedDots(key) {
		name := part
		var idx []int
		for strings.HasSuffix(name, "]") {
			open := strings.LastIndexByte(name, '[')
			if open < 0 {
				break
			}
			n, err := strconv.Atoi(name[open+1 : len(name)-1])
			if err != nil {
				break
			}
			idx = append([]int{n}, idx...)
			name = name[:open]
		}
		out = append(out, pathElem{key: name, index: -1})
		for _, n := range idx {
			out = append(out, pathElem{index: n})
		}
	}
	return out
}

func splitUnescapedDots(key string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(key); i++ {
		if key[i] == '\\' && i+1 < len(key) && key[i+1] == '.' {
			cur.WriteByte('.')
			i++
			continue
		}
		if key[i] == '.' {
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(key[i])
	}
	return append(out, cur.String())
}

func setPath(root map[string]interface{}, path []pathElem, value interface{}) error {
	var cur interface{} = root
	var setParent func(interface{})
	for i, p := range path {
		last := i == len(path)-1
		if p.index < 0 {
			m, ok := cur.(map[string]interface{})
			if !ok {
				m = map[string]interface{}{}
				setParent(m)
			}
			if last {
				m[p.key] = value
				return nil
			}
			next := m[p.key]
			key := p.key
			setParent = func(v interface{}) { m[key] = v }
			cur = next
			continue
		}
		s, _ := cur.([]interface{})
		for len(s) <= p.index {
			s = append(s, nil)
		}
		setParent(s)
		if last {
			s[p.index] = value
			return nil
		}
		idx := p.index
		setParent = func(v interface{}) { s[idx] = v }
		cur = s[idx]
	}
	return nil
}

func typedVal(val string, asString bool) interface{} {
	if asString {
		return val
	}
	switch {
	case strings.EqualFold(val, "true"):
		return true
	case strings.EqualFold(val, "false"):
		return false
	case strings.EqualFold(val, "null"):
		return nil
	case val == "0":
		return int64(0)
	}
	if len(val) != 0 && val[0] != '0' {
		if iv, err := strconv.ParseInt(val, 10, 64); err == nil {
			return iv
		}
	}
	return val
}
