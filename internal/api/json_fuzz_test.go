package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	segjson "github.com/segmentio/encoding/json"
)

// referenceDuplicates finds duplicate members with the token decoder (slow
// but obviously right).
func referenceDuplicates(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var walk func() bool
	walk = func() bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, _ := dec.Token()
				key, _ := k.(string)
				if seen[key] {
					return true
				}
				seen[key] = true
				if walk() {
					return true
				}
			}
			dec.Token()
		case json.Delim('['):
			for dec.More() {
				if walk() {
					return true
				}
			}
			dec.Token()
		}
		return false
	}
	return walk()
}

// referenceOutOfRange reports whether a number of body (valid JSON) does
// not fit a float64, by decoding every token.
func referenceOutOfRange(body []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); errors.Is(err, strconv.ErrRange) {
				return true
			}
		}
	}
}

// FuzzWellFormedJSON: the request-body check never panics, accepts
// exactly the valid UTF-8 JSON that encoding/json accepts (it validates
// with segmentio/encoding's faster Valid) save numbers out of float64's
// range, and finds duplicate members and such numbers exactly when the
// references do.
func FuzzWellFormedJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `[{"a":1},{"a":1}]`, `{"a\u0062":1,"ab":2}`,
		`{"a":"\"","b":"\\"}`, `{"x":[1,2,{"y":null,"z":true}]}`, `"s"`, `1e400`, `[1e308,-1E+309]`, `{"a":[1.5e-400]}`, `{"a":1}{}`, `{"` + strings.Repeat("k", 20) + `":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := wellFormedJSON(body)
		if err == nil && !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		if json.Valid(body) && utf8.Valid(body) && !bytes.HasPrefix(body, []byte("\xef\xbb\xbf")) {
			dup := referenceDuplicates(body)
			gotDup := err != nil && strings.Contains(err.Error(), "appears twice")
			deep := err != nil && strings.Contains(err.Error(), "deeper")
			rng := err != nil && strings.Contains(err.Error(), "out of range")
			if rng && !referenceOutOfRange(body) {
				t.Fatalf("refused %q as out of range: %v", body, err)
			}
			if dup != gotDup && !deep && !rng {
				t.Fatalf("duplicates: reference %v, check %v (%v) for %q", dup, gotDup, err, body)
			}
			if !dup && !deep && referenceOutOfRange(body) != rng {
				t.Fatalf("out of range: reference %v, check %v (%v) for %q", referenceOutOfRange(body), rng, err, body)
			}
			if !dup && !deep && !rng && err != nil {
				t.Fatalf("refused well-formed JSON %q: %v", body, err)
			}
		}
	})
}

// FuzzUnmarshalBodyValidationPass checks the parse of huma's validation
// pass (unmarshalBody into *any, strings sharing one copy of the body)
// against segmentio's plain Unmarshal: the same value, an error exactly
// when it gives one, and a value that does not change when the body's
// bytes do afterwards (huma reuses its body buffer before it writes a
// validation error naming a value).
func FuzzUnmarshalBodyValidationPass(f *testing.F) {
	for _, b := range []string{`{"tenant":"acme","type":"a.b","data":{"s":"x y","n":1.5e3}}`, `{"a":1} x`, `{"a":"\u00e9\n"}`, `[1,"2",null]`, `{"a":`, ` "s" `, ``} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var got, want any
		err := unmarshalBody(body, &got)
		wantErr := segjson.Unmarshal(body, &want)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("unmarshalBody(%q): %v; Unmarshal: %v", body, err, wantErr)
		}
		if err != nil {
			return
		}
		before, _ := json.Marshal(got)
		for i := range body {
			body[i] = 'z'
		}
		after, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		if !bytes.Equal(before, wantJSON) || !bytes.Equal(after, before) {
			t.Fatalf("unmarshalBody gave %s, %s once the body changed; Unmarshal gives %s", before, after, wantJSON)
		}
	})
}
