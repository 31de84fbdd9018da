package catalog

import (
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
)

// CheckRefCycles refuses a schema in which a subschema applies itself to
// the same value: a chain of in-place applicators — a "$ref" to a local
// JSON pointer ("#/properties/a", "#"), "allOf", "anyOf", "oneOf", "not",
// "if", "then", "else", "dependentSchemas" — that leads back to where it
// started, such as {"properties":{"a":{"$ref":"#/properties/a"}}}. The
// validator meets such a cycle only when data reaches it, and then refuses
// the data ("causing reference cycle"), so every event carrying that member
// would be refused (422) for good: a version's schema never changes. A
// recursive schema whose references move into the value (through
// "properties", "items"…) has no such cycle. Other references (an
// "#anchor", a URL, "$dynamicRef") are not followed, and a schema with an
// embedded "$id" (draft-04: "id"), which rebases the "#/…" references
// under it, is not checked. The error names the first subschema of a cycle, in pointer
// order, and the rule.
func (s *Schema) CheckRefCycles() error {
	root, ok := s.raw.(map[string]any)
	if !ok {
		return nil
	}
	nodes := map[string]map[string]any{}
	embeddedID := false
	var walk func(ptr string, m map[string]any)
	walk = func(ptr string, m map[string]any) {
		if _, ok := nodes[ptr]; ok {
			return
		}
		nodes[ptr] = m
		// Draft-04 names it "id"; elsewhere an "id" keyword is unknown, and
		// taking it for one only skips the check.
		if _, ok := m["$id"]; ok && ptr != "" {
			embeddedID = true
		}
		if _, ok := m["id"].(string); ok && ptr != "" {
			embeddedID = true
		}
		for k, v := range m {
			switch k {
			case "properties", "patternProperties", "$defs", "definitions", "dependentSchemas":
				if sub, ok := v.(map[string]any); ok {
					for name, c := range sub {
						if cm, ok := c.(map[string]any); ok {
							walk(ptr+"/"+k+"/"+pointerEscaper.Replace(name), cm)
						}
					}
				}
			case "allOf", "anyOf", "oneOf", "prefixItems", "items":
				if arr, ok := v.([]any); ok {
					for i, c := range arr {
						if cm, ok := c.(map[string]any); ok {
							walk(ptr+"/"+k+"/"+strconv.Itoa(i), cm)
						}
					}
					continue
				}
				fallthrough
			case "not", "if", "then", "else", "additionalProperties", "unevaluatedProperties",
				"unevaluatedItems", "additionalItems", "contains", "propertyNames":
				if cm, ok := v.(map[string]any); ok {
					walk(ptr+"/"+k, cm)
				}
			}
		}
	}
	walk("", root)
	if embeddedID {
		return nil
	}
	// inPlace lists the subschemas that ptr's schema applies to the same
	// value, with the keyword that does.
	inPlace := func(ptr string) (out [][2]string) {
		m := nodes[ptr]
		if ref, ok := m["$ref"].(string); ok && strings.HasPrefix(ref, "#") {
			if frag, err := url.PathUnescape(ref[1:]); err == nil {
				if _, ok := nodes[frag]; ok {
					out = append(out, [2]string{frag, `"$ref":"` + ref + `"`})
				}
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if arr, ok := m[k].([]any); ok {
				for i := range arr {
					out = append(out, [2]string{ptr + "/" + k + "/" + strconv.Itoa(i), k})
				}
			}
		}
		for _, k := range []string{"not", "if", "then", "else"} {
			if _, ok := m[k].(map[string]any); ok {
				out = append(out, [2]string{ptr + "/" + k, k})
			}
		}
		if sub, ok := m["dependentSchemas"].(map[string]any); ok {
			for name := range sub {
				out = append(out, [2]string{ptr + "/dependentSchemas/" + pointerEscaper.Replace(name), "dependentSchemas"})
			}
		}
		return out
	}
	ptrs := make([]string, 0, len(nodes))
	for p := range nodes {
		ptrs = append(ptrs, p)
	}
	sort.Strings(ptrs)
	const (
		unseen = iota
		open
		done
	)
	state := make(map[string]int, len(nodes))
	var cycleAt, via string
	var visit func(p string) bool
	visit = func(p string) bool {
		state[p] = open
		for _, e := range inPlace(p) {
			if _, ok := nodes[e[0]]; !ok {
				continue
			}
			switch state[e[0]] {
			case open:
				cycleAt, via = e[0], e[1]
				return true
			case unseen:
				if visit(e[0]) {
					return true
				}
			}
		}
		state[p] = done
		return false
	}
	for _, p := range ptrs {
		if state[p] == unseen && visit(p) {
			name := cycleAt
			if name == "" {
				name = "(the root)"
			}
			return fmt.Errorf("the subschema at %s applies itself to the same value (a reference cycle, closed by %s): the validator would refuse every event that reaches it; a $ref chain must move into the value (through properties, items…) before it comes back", name, via)
		}
	}
	return nil
}
