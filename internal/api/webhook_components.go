package api

import (
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// schemaComponents collects the schemas /openapi.json lists under
// components.schemas besides the API's own: the event type versions'
// data schemas that name parts of themselves ($defs, definitions) or
// refer to themselves, and those parts (hoistDataSchema).
type schemaComponents struct {
	taken   map[string]bool // every name in components.schemas
	schemas map[string]any  // the ones added here
}

// newSchemaComponents starts from the document's existing
// components.schemas, whose names are never reused.
func newSchemaComponents(doc map[string]any) *schemaComponents {
	c := &schemaComponents{taken: map[string]bool{}, schemas: map[string]any{}}
	if comps, ok := doc["components"].(map[string]any); ok {
		if schemas, ok := comps["schemas"].(map[string]any); ok {
			for name := range schemas {
				c.taken[name] = true
			}
		}
	}
	return c
}

// notComponentNameChar is a character OpenAPI 3.1 does not allow in a
// components key (^[a-zA-Z0-9.\-_]+$, "Components Object"), or ".",
// which separates a def's name from its owner's.
var notComponentNameChar = regexp.MustCompile(`[^a-zA-Z0-9_-]`)

// reserve returns name, or name_2, name_3… when it is taken, and takes it.
func (c *schemaComponents) reserve(name string) string {
	for i, n := 2, name; ; i++ {
		if !c.taken[n] {
			c.taken[n] = true
			return n
		}
		n = name + "_" + strconv.Itoa(i)
	}
}

// addTo puts the collected schemas into doc's components.schemas.
func (c *schemaComponents) addTo(doc map[string]any) {
	if len(c.schemas) == 0 {
		return
	}
	comps, ok := doc["components"].(map[string]any)
	if !ok {
		comps = map[string]any{}
		doc["components"] = comps
	}
	schemas, ok := comps["schemas"].(map[string]any)
	if !ok {
		schemas = map[string]any{}
		comps["schemas"] = schemas
	}
	for name, s := range c.schemas {
		schemas[name] = s
	}
}

// hoisted is one schema hoistDataSchema moves to components.schemas: the
// data schema itself (ptr "") or one of its $defs or definitions entries,
// at JSON pointer ptr within the data schema.
type hoisted struct {
	ptr, name string
	schema    map[string]any
	parent    map[string]any // the schema holding it under kw (nil: the root)
	kw, key   string
}

// hoistDataSchema returns what the webhook named name embeds as its
// data schema: s itself when s names no part of itself and refers to no
// part of itself, else a $ref to s moved into c under name. Each $defs
// or definitions entry, at any depth, is then moved too, as name.def
// (characters OpenAPI does not allow in a component's name become "_"),
// and every reference into s ("#", "#/$defs/money/…", or s's $id followed
// by such a fragment) is rewritten to the same place among the
// components. In the document "#" is its root, where "#/$defs/money" names
// nothing; and openapi-typescript (7.x) turns a $defs left in a schema
// into a required property and cannot follow a reference into a
// webhook's request body, so a receiver's types generated from such a
// document did not compile. A reference may be relative to s's $id
// ("inv.json#/$defs/money" for the $id "https://example.com/inv.json"),
// which the document, keeping no $id, would read as another file; and it
// may name an anchor s defines ("#money" for an "$anchor": "money", or
// for a "$dynamicAnchor" when the reference is a $ref): those are
// rewritten to the same place too, and s's $anchor keywords are dropped,
// since every anchor left in the document is one name for all of it (two
// versions with the same anchor would clash), and openapi-typescript
// (7.x) could generate no types at all from a document with either
// reference. A reference to an anchor s does not define is left as it is.
func hoistDataSchema(s map[string]any, name, id string, c *schemaComponents) any {
	var found []hoisted
	idx := newSelfIndex(id)
	var anchored, identified []map[string]any // the subschemas holding an $anchor, an $id
	var collect func(v any, ptr, owner, base string)
	collect = func(v any, ptr, owner, base string) {
		switch v := v.(type) {
		case []any:
			for i, e := range v {
				collect(e, ptr+"/"+strconv.Itoa(i), owner, base)
			}
		case map[string]any:
			base = idx.enter(v, base, ptr)
			if _, ok := v["$id"].(string); ok {
				identified = append(identified, v)
			}
			if a, ok := v["$anchor"].(string); ok {
				idx.addAnchor(idx.plain, base, a, ptr)
				anchored = append(anchored, v)
			}
			if a, ok := v["$dynamicAnchor"].(string); ok {
				idx.addAnchor(idx.dynamic, base, a, ptr)
			}
			for _, k := range sortedKeys(v) {
				sub := v[k]
				switch {
				case k == "$defs" || k == "definitions":
					m, ok := sub.(map[string]any)
					if !ok {
						continue
					}
					for _, d := range sortedKeys(m) {
						ds, ok := m[d].(map[string]any)
						if !ok {
							continue
						}
						dptr := ptr + "/" + k + "/" + escapePointer(d)
						h := hoisted{ptr: dptr, name: owner + "." + notComponentNameChar.ReplaceAllString(d, "_"), schema: ds, parent: v, kw: k, key: d}
						found = append(found, h)
						collect(ds, dptr, h.name, base)
					}
				case schemaKeywords[k]:
					collect(sub, ptr+"/"+escapePointer(k), owner, base)
				case schemaMapKeywords[k]:
					if m, ok := sub.(map[string]any); ok {
						for _, p := range sortedKeys(m) {
							collect(m[p], ptr+"/"+escapePointer(k)+"/"+escapePointer(p), owner, base)
						}
					}
				}
			}
		}
	}
	collect(s, "", name, idx.root)
	// Every reference to an anchor or embedded resource of s is rewritten
	// below (or s refers to none): they name nothing the document needs.
	defer func() {
		for _, a := range anchored {
			delete(a, "$anchor")
		}
		for _, a := range identified {
			delete(a, "$id")
		}
	}()
	if len(found) == 0 && !refersToItself(s, idx) {
		return s
	}
	root := hoisted{ptr: "", name: c.reserve(name), schema: s}
	// Names are final before any reference is rewritten: a def's name
	// follows its owner's, which reserve may have changed.
	final := map[string]string{name: root.name} // provisional name → final
	for i := range found {
		provisional := found[i].name
		owner := provisional[:strings.LastIndexByte(provisional, '.')]
		found[i].name = c.reserve(final[owner] + provisional[len(owner):])
		final[provisional] = found[i].name
	}
	all := append([]hoisted{root}, found...)
	rewriteRefs(s, idx.root, idx, func(frag string) string {
		best := root
		for _, h := range found {
			if (frag == h.ptr || strings.HasPrefix(frag, h.ptr+"/")) && len(h.ptr) > len(best.ptr) {
				best = h
			}
		}
		rest := url.URL{Fragment: frag[len(best.ptr):]}
		return "#/components/schemas/" + best.name + rest.EscapedFragment()
	})
	for _, h := range all {
		c.schemas[h.name] = h.schema
		if h.parent == nil {
			continue
		}
		m := h.parent[h.kw].(map[string]any)
		delete(m, h.key)
		if len(m) == 0 {
			delete(h.parent, h.kw)
		}
	}
	return map[string]any{"$ref": "#/components/schemas/" + root.name}
}

// refersToItself reports whether schema s has a reference into itself
// (selfIndex.pointer).
func refersToItself(s any, idx *selfIndex) bool {
	found := false
	rewriteRefs(s, idx.root, idx, func(frag string) string {
		found = true
		return ""
	})
	return found
}

// selfIndex locates, within a data schema, what its references may name:
// the schema itself and each subschema with an $id (a resource of its
// own, against whose URI the references inside it resolve), and the
// plain-name anchors of each ($anchor, $dynamicAnchor, and a draft-07
// "$id": "#name"), the first of each name.
type selfIndex struct {
	root           string            // the data schema's URI: its $id without fragment, "" for none
	resources      map[string]string // a resource's absolute URI → its JSON pointer in the data schema
	plain, dynamic map[string]string // resource URI + "#" + anchor name → JSON pointer
}

func newSelfIndex(id string) *selfIndex {
	root, _, _ := resolveRef("", id)
	return &selfIndex{root: root, resources: map[string]string{root: ""}, plain: map[string]string{}, dynamic: map[string]string{}}
}

// enter returns the base URI inside subschema v at ptr, base outside it:
// base, or v's $id resolved against base, recorded as a resource (an
// "$id": "#name" is recorded as an anchor).
func (x *selfIndex) enter(v map[string]any, base, ptr string) string {
	id, ok := v["$id"].(string)
	if !ok || ptr == "" {
		return base
	}
	uri, frag, ok := resolveRef(base, id)
	if !ok {
		return base
	}
	if frag != "" {
		x.addAnchor(x.plain, uri, frag, ptr)
		return base
	}
	if _, dup := x.resources[uri]; !dup {
		x.resources[uri] = ptr
	}
	return uri
}

func (x *selfIndex) addAnchor(m map[string]string, base, name, ptr string) {
	if _, dup := m[base+"#"+name]; !dup {
		m[base+"#"+name] = ptr
	}
}

// resolveRef resolves ref against base: the URI without fragment, and
// the fragment, percent-decoded.
func resolveRef(base, ref string) (uri, frag string, ok bool) {
	if strings.HasPrefix(ref, "#") {
		f, err := url.PathUnescape(ref[1:])
		return base, f, err == nil
	}
	b, err := url.Parse(base)
	if err != nil {
		return "", "", false
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", "", false
	}
	abs := b.ResolveReference(r)
	frag = abs.Fragment
	abs.Fragment, abs.RawFragment = "", ""
	return abs.String(), frag, true
}

// pointer returns the JSON pointer within the data schema of the place
// its keyword kw ($ref or $dynamicRef), at a place whose base URI is base,
// names with ref, when that place is in the data schema: a JSON pointer
// fragment ("#", "#/…") or a plain-name fragment naming an anchor (an
// $anchor; for a $ref also a $dynamicAnchor: a $dynamicRef to one stays
// dynamic) of the data schema or of a resource embedded in it, the URI
// written relative to base or in full.
func (x *selfIndex) pointer(kw, ref, base string) (string, bool) {
	uri, frag, ok := resolveRef(base, ref)
	if !ok {
		return "", false
	}
	res, ok := x.resources[uri]
	if !ok {
		return "", false
	}
	if frag == "" || strings.HasPrefix(frag, "/") {
		return res + frag, true
	}
	if p, ok := x.plain[uri+"#"+frag]; ok {
		return p, true
	}
	if p, ok := x.dynamic[uri+"#"+frag]; ok && kw == "$ref" {
		return p, true
	}
	return "", false
}

// rewriteRefs replaces each $ref and $dynamicRef of schema s (walking
// only the keywords whose values are schemas), base being the base URI
// at s, that points into the data schema (selfIndex.pointer) by to(frag),
// frag being the JSON pointer ("" for the root, "/$defs/money" …). When to
// returns "", the reference is left.
func rewriteRefs(s any, base string, idx *selfIndex, to func(frag string) string) {
	switch s := s.(type) {
	case []any:
		for _, e := range s {
			rewriteRefs(e, base, idx, to)
		}
	case map[string]any:
		if id, ok := s["$id"].(string); ok {
			if uri, frag, ok := resolveRef(base, id); ok && frag == "" {
				base = uri
			}
		}
		for _, kw := range []string{"$ref", "$dynamicRef"} {
			ref, ok := s[kw].(string)
			if !ok {
				continue
			}
			frag, ok := idx.pointer(kw, ref, base)
			if !ok {
				continue
			}
			if r := to(frag); r != "" {
				s[kw] = r
			}
		}
		for k, v := range s {
			switch {
			case schemaKeywords[k]:
				rewriteRefs(v, base, idx, to)
			case schemaMapKeywords[k]:
				if m, ok := v.(map[string]any); ok {
					for _, sub := range m {
						rewriteRefs(sub, base, idx, to)
					}
				}
			}
		}
	}
}

// escapePointer escapes a JSON pointer token (RFC 6901: "~" as "~0", "/"
// as "~1").
func escapePointer(tok string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(tok)
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
