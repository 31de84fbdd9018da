package api_test

import (
	"encoding/json"
	"strings"
	"testing"
)

const hmacCreate = `{"name":"h","destination_url":"http://10.0.0.3/in","scheme":"hmac","secrets":["source-secret-0123456789"],"tolerance_seconds":60,
	"hmac":{"header":"X-Sig","encoding":"base64","prefix":"v1=","timestamp_header":"X-Ts","template":"{timestamp}.{body}"}}`

func createHMACSource(t *testing.T, w *world) string {
	t.Helper()
	st, raw := w.call(adminKey, "POST", "/v1/sources", hmacCreate)
	if st != 201 {
		t.Fatalf("create: %d %s", st, raw)
	}
	var src struct{ ID string }
	if err := json.Unmarshal(raw, &src); err != nil {
		t.Fatal(err)
	}
	return src.ID
}

// TestSourceHMACFormatCharacterRefused: an invisible format character
// (Unicode category Cf) in an hmac prefix or template is refused at the
// setting, naming the rule, on a create and on a PATCH, nothing stored.
func TestSourceHMACFormatCharacterRefused(t *testing.T) {
	w := newWorld(t, nil)
	id := createHMACSource(t, w)
	_, before := w.call(adminKey, "GET", "/v1/sources/"+id, "")
	const create = `{"name":"x","destination_url":"http://10.0.0.3/in","scheme":"hmac","secrets":["source-secret-0123456789"],`
	for _, c := range []struct{ method, path, body, loc string }{
		{"POST", "/v1/sources", create + `"hmac":{"header":"X-Sig","prefix":"\u202ev1="}}`, "body.hmac.prefix"},
		{"POST", "/v1/sources", create + `"hmac":{"header":"X-Sig","template":"{body}\u200b"}}`, "body.hmac.template"},
		{"PATCH", "/v1/sources/" + id, `{"hmac":{"header":"X-Sig","prefix":"\u202ev1="}}`, "body.hmac.prefix"},
		{"PATCH", "/v1/sources/" + id, `{"hmac":{"header":"X-Sig","timestamp_header":"X-Ts","template":"\ufeff{timestamp}.{body}"}}`, "body.hmac.template"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		wantOneRefusal(t, c.method+" "+c.body, st, raw, c.loc, "invisible format character")
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+id, ""); string(after) != string(before) {
		t.Errorf("refused PATCHes changed the source:\n%s\nwant\n%s", after, before)
	}
}

// TestSourceHMACPatchKeepsMembersLeftOut: a PATCH of hmac changes the
// members it gives and keeps those it leaves out (as every field of a
// source's PATCH), and never changes tolerance_seconds when it is left
// out: an hmac that drops its timestamp header while the source has a
// tolerance is refused naming both, unless the PATCH sets the tolerance.
func TestSourceHMACPatchKeepsMembersLeftOut(t *testing.T) {
	w := newWorld(t, nil)
	id := createHMACSource(t, w)
	st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+id, `{"hmac":{"header":"X-Sig2"}}`)
	if st != 200 {
		t.Fatalf("PATCH header: %d %s", st, raw)
	}
	var got struct {
		ToleranceSeconds int `json:"tolerance_seconds"`
		HMAC             map[string]string
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"header": "X-Sig2", "encoding": "base64", "prefix": "v1=", "timestamp_header": "X-Ts", "template": "{timestamp}.{body}"}
	for k, v := range want {
		if got.HMAC[k] != v {
			t.Errorf("after PATCH header: hmac.%s = %q; want %q kept (%s)", k, got.HMAC[k], v, raw)
		}
	}
	if got.ToleranceSeconds != 60 {
		t.Errorf("after PATCH header: tolerance_seconds %d; want 60 kept", got.ToleranceSeconds)
	}
	_, before := w.call(adminKey, "GET", "/v1/sources/"+id, "")
	st, raw = w.call(adminKey, "PATCH", "/v1/sources/"+id, `{"hmac":{"timestamp_header":"","template":"{body}"}}`)
	wantOneRefusal(t, "PATCH dropping timestamp_header", st, raw, "body.hmac.timestamp_header", "tolerance_seconds")
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+id, ""); string(after) != string(before) {
		t.Errorf("a refused PATCH changed the source:\n%s\nwant\n%s", after, before)
	}
	st, raw = w.call(adminKey, "PATCH", "/v1/sources/"+id, `{"tolerance_seconds":0,"hmac":{"timestamp_header":"","template":"{body}"}}`)
	if st != 200 || !strings.Contains(string(raw), `"tolerance_seconds":0`) || strings.Contains(string(raw), "X-Ts") {
		t.Errorf("PATCH dropping timestamp_header with tolerance_seconds 0: %d %s", st, raw)
	}
}

// TestSourceHMACPatchNullMemberRefused: null inside hmac is refused at the
// member, as a top-level null is, nothing changed.
func TestSourceHMACPatchNullMemberRefused(t *testing.T) {
	w := newWorld(t, nil)
	id := createHMACSource(t, w)
	_, before := w.call(adminKey, "GET", "/v1/sources/"+id, "")
	for _, m := range []string{"header", "algorithm", "encoding", "prefix", "timestamp_header", "template"} {
		body := `{"hmac":{"header":"X-Sig","` + m + `":null}}`
		if m == "header" {
			body = `{"hmac":{"header":null}}`
		}
		st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+id, body)
		wantOneRefusal(t, "PATCH "+body, st, raw, "body.hmac."+m, "cannot be null")
	}
	if _, after := w.call(adminKey, "GET", "/v1/sources/"+id, ""); string(after) != string(before) {
		t.Errorf("refused PATCHes changed the source:\n%s\nwant\n%s", after, before)
	}
}

// TestSourceHMACChoicesNameTheirValues: an hmac algorithm or encoding
// outside its choices is refused at the setting with the choices named —
// not huma's list, which on a PATCH ends in the empty value that means
// the default ("sha256, sha1, sha512, ").
func TestSourceHMACChoicesNameTheirValues(t *testing.T) {
	w := newWorld(t, nil)
	id := createHMACSource(t, w)
	const create = `{"name":"x","destination_url":"http://10.0.0.3/in","scheme":"hmac","secrets":["source-secret-0123456789"],`
	for _, c := range []struct{ method, path, body, loc, want string }{
		{"POST", "/v1/sources", create + `"hmac":{"header":"X-Sig","algorithm":"md5"}}`, "body.hmac.algorithm", "sha256, sha1 or sha512"},
		{"PATCH", "/v1/sources/" + id, `{"hmac":{"algorithm":"md5"}}`, "body.hmac.algorithm", "sha256, sha1 or sha512"},
		{"PATCH", "/v1/sources/" + id, `{"hmac":{"encoding":"b64"}}`, "body.hmac.encoding", "hex or base64"},
	} {
		st, raw := w.call(adminKey, c.method, c.path, c.body)
		wantOneRefusal(t, c.method+" "+c.body, st, raw, c.loc, c.want)
		if strings.Contains(string(raw), `, \"`) || strings.Contains(string(raw), `sha512, "`) {
			t.Errorf("%s %s: %s lists an empty choice", c.method, c.body, raw)
		}
	}
}
