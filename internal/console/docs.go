package console

import (
	"bytes"
	"html/template"
	"net/http"
	"sort"
	"strings"

	"github.com/danielgtaylor/huma/v2"
)

// The API reference at /docs is rendered here, once at start, from the
// same OpenAPI document served at /openapi.json: no script, no CDN, so it
// works offline and under the console's Content-Security-Policy.

type docOp struct {
	Method, Path, ID, Summary, Description string
	Roles                                  string
	Params                                 []docField
	Body                                   []docField
	BodyName                               string
	Responses                              []docResponse
}

type docField struct {
	Name, In, Type, Doc string
	Required            bool
}

type docResponse struct {
	Status, Description, Schema string
	Fields                      []docField
}

type docTag struct {
	Name string
	Ops  []docOp
}

type docsData struct {
	Title, Version, Description string
	Tags                        []docTag
}

func schemaName(s *huma.Schema) string {
	if s == nil {
		return ""
	}
	if s.Ref != "" {
		return s.Ref[strings.LastIndex(s.Ref, "/")+1:]
	}
	if s.Type == "array" && s.Items != nil {
		return "array of " + typeOf(s.Items)
	}
	return s.Type
}

func typeOf(s *huma.Schema) string {
	if s == nil {
		return ""
	}
	t := schemaName(s)
	if t == "" && len(s.OneOf) > 0 {
		t = "one of several"
	}
	if len(s.Enum) > 0 {
		var vs []string
		for _, e := range s.Enum {
			if str, ok := e.(string); ok {
				vs = append(vs, str)
			}
		}
		if len(vs) > 0 {
			t += " (" + strings.Join(vs, ", ") + ")"
		}
	}
	return t
}

func resolve(reg huma.Registry, s *huma.Schema) *huma.Schema {
	if s != nil && s.Ref != "" && reg != nil {
		if r := reg.SchemaFromRef(s.Ref); r != nil {
			return r
		}
	}
	return s
}

func fields(reg huma.Registry, s *huma.Schema) []docField {
	s = resolve(reg, s)
	if s == nil || len(s.Properties) == 0 {
		return nil
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		if n == "$schema" {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]docField, 0, len(names))
	for _, n := range names {
		p := s.Properties[n]
		out = append(out, docField{Name: n, Type: typeOf(p), Doc: p.Description, Required: req[n]})
	}
	return out
}

func renderDocs(o *huma.OpenAPI, version string) ([]byte, error) {
	var reg huma.Registry
	if o.Components != nil {
		reg = o.Components.Schemas
	}
	d := docsData{Version: version}
	if o.Info != nil {
		d.Title, d.Description = o.Info.Title, o.Info.Description
	}
	byTag := map[string][]docOp{}
	for path, item := range o.Paths {
		for _, mo := range []struct {
			m  string
			op *huma.Operation
		}{{"GET", item.Get}, {"POST", item.Post}, {"PUT", item.Put}, {"PATCH", item.Patch}, {"DELETE", item.Delete}} {
			op := mo.op
			if op == nil {
				continue
			}
			do := docOp{Method: mo.m, Path: path, ID: op.OperationID, Summary: op.Summary, Description: op.Description}
			if roles, ok := op.Extensions["x-herald-roles"].([]string); ok {
				do.Roles = strings.Join(roles, ", ")
			}
			for _, p := range op.Parameters {
				do.Params = append(do.Params, docField{Name: p.Name, In: p.In, Type: typeOf(p.Schema), Doc: p.Description, Required: p.Required})
			}
			if op.RequestBody != nil {
				if mt := op.RequestBody.Content["application/json"]; mt != nil {
					do.BodyName = schemaName(mt.Schema)
					do.Body = fields(reg, mt.Schema)
				}
			}
			codes := make([]string, 0, len(op.Responses))
			for c := range op.Responses {
				codes = append(codes, c)
			}
			sort.Strings(codes)
			for _, code := range codes {
				r := op.Responses[code]
				dr := docResponse{Status: code, Description: r.Description}
				for ct, mt := range r.Content {
					if mt.Schema != nil && (ct == "application/json") {
						dr.Schema = schemaName(mt.Schema)
						if code < "300" {
							dr.Fields = fields(reg, mt.Schema)
						}
					} else if mt.Schema != nil && dr.Schema == "" {
						dr.Schema = schemaName(mt.Schema) + " (" + ct + ")"
					}
				}
				do.Responses = append(do.Responses, dr)
			}
			tag := "other"
			if len(op.Tags) > 0 {
				tag = op.Tags[0]
			}
			byTag[tag] = append(byTag[tag], do)
		}
	}
	tags := make([]string, 0, len(byTag))
	for t := range byTag {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	for _, t := range tags {
		ops := byTag[t]
		sort.Slice(ops, func(i, j int) bool {
			if ops[i].Path != ops[j].Path {
				return ops[i].Path < ops[j].Path
			}
			return ops[i].Method < ops[j].Method
		})
		d.Tags = append(d.Tags, docTag{Name: t, Ops: ops})
	}
	t, err := template.New("docs.tmpl").ParseFS(assets, "templates/docs.tmpl")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (c *Console) serveDocs(w http.ResponseWriter, r *http.Request) {
	secureHeaders(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(c.docs)
}
