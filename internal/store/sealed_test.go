package store_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/secretbox"
	"github.com/herald-webhooks/herald/internal/store"
)

// memSealed is a SealedStore in memory: "table.column" → key → value. onReplace,
// when set, runs before a compare-and-set (to change a value meanwhile).
type memSealed struct {
	rows      map[string]map[string]string
	onReplace func(table, key string)
	replaced  int
}

func (m *memSealed) SealedValues(_ context.Context, c store.SealedColumn, after string, limit int) ([]store.SealedValue, error) {
	var keys []string
	for k := range m.rows[c.Table+"."+c.Column] {
		if k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []store.SealedValue
	for _, k := range keys {
		if len(out) == limit {
			break
		}
		out = append(out, store.SealedValue{Key: k, Value: m.rows[c.Table+"."+c.Column][k]})
	}
	return out, nil
}

func (m *memSealed) SealedValue(_ context.Context, c store.SealedColumn, key string) (string, bool, error) {
	v, ok := m.rows[c.Table+"."+c.Column][key]
	return v, ok, nil
}

func (m *memSealed) ReplaceSealed(_ context.Context, c store.SealedColumn, key, old, new string) (bool, error) {
	if m.onReplace != nil {
		f := m.onReplace
		m.onReplace = nil
		f(c.Table, key)
	}
	if m.rows[c.Table+"."+c.Column][key] != old {
		return false, nil
	}
	m.rows[c.Table+"."+c.Column][key] = new
	m.replaced++
	return true, nil
}

func box(t *testing.T) *secretbox.Box {
	k := make([]byte, secretbox.KeySize)
	rand.Read(k)
	b, err := secretbox.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRekeyEverySealedColumn: every value of store.SealedColumns moves to
// the new key (plain values are left alone); a value changed between read
// and write is read again, not overwritten; a second run finds everything
// current (resume); a value neither key opens stops the run naming its
// row.
func TestRekeyEverySealedColumn(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	oldBox, newBox := box(t), box(t)
	seal := func(b store.SecretBox, ctxt, v string) string {
		s, err := store.SealBytes(b, ctxt, []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	check, err := oldBox.Seal([]byte("herald key check v1"), []byte(store.KeyCheckMeta))
	if err != nil {
		t.Fatal(err)
	}
	m := &memSealed{rows: map[string]map[string]string{
		"endpoints.secrets": {"ep_1": seal(oldBox, "ep_1", "s1"), "ep_2": seal(oldBox, "ep_2", "s2"), "ep_plain": `[{"value":"x"}]`},
		// Header values are sealed one by one inside a JSON object; one is
		// still in clear (written by an earlier version).
		"endpoints.headers": {"ep_1": `{"A":"` + seal(oldBox, store.HeaderContext("ep_1", "A"), "a") + `","B":"plain-b"}`},
		"sources.config":    {"src_1": seal(oldBox, "src_1", "cfg")},
		"meta.value":        {store.KeyCheckMeta: b64(check)},
	}}

	// ep_2 is rotated by a node (sealed with the new key) between rekey's
	// read and its write.
	m.onReplace = func(table, key string) {
		if table == "endpoints" {
			m.rows["endpoints.secrets"]["ep_1"] = seal(newBox, "ep_1", "s1-rotated")
		}
	}
	stats, err := store.Rekey(ctx, m, oldBox, newBox)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rewritten != 4 || stats.Current != 1 || stats.Plain != 2 {
		t.Fatalf("stats %+v, want 4 rewritten (ep_2, ep_1's headers, src_1, key check), 1 current (ep_1 rotated meanwhile), 2 plain (ep_plain, header B)", stats)
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(m.rows["endpoints.headers"]["ep_1"]), &headers); err != nil {
		t.Fatal(err)
	}
	if got, err := store.OpenBytes(newBox, store.HeaderContext("ep_1", "A"), headers["A"]); err != nil || string(got) != "a" || headers["B"] != "plain-b" {
		t.Errorf("headers after rekey: %v (A opens to %q, %v); want A under the new key, B left in clear", headers, got, err)
	}
	for _, c := range store.SealedColumns {
		for key, v := range m.rows[c.Table+"."+c.Column] {
			if key == "ep_plain" || c.Member != nil {
				continue
			}
			ctxt := key
			if c.Context != nil {
				ctxt = c.Context(key)
			}
			var err error
			if c.Bare {
				err = store.CheckKeyValue(newBox, v)
			} else {
				_, err = store.OpenBytes(newBox, ctxt, v)
			}
			if err != nil {
				t.Errorf("%s.%s %s does not open with the new key: %v", c.Table, c.Column, key, err)
			}
		}
	}
	if got, _ := store.OpenBytes(newBox, "ep_1", m.rows["endpoints.secrets"]["ep_1"]); string(got) != "s1-rotated" {
		t.Errorf("the secret rotated meanwhile was overwritten: %q", got)
	}
	again, err := store.Rekey(ctx, m, oldBox, newBox)
	if err != nil || again.Rewritten != 0 || again.Current != 5 {
		t.Fatalf("second run: %+v, %v; want all 5 current", again, err)
	}
	m.rows["sources.config"]["src_bad"] = seal(box(t), "src_bad", "x")
	if _, err := store.Rekey(ctx, m, oldBox, newBox); err == nil || !strings.Contains(err.Error(), "src_bad") {
		t.Fatalf("unopenable value: %v, want an error naming src_bad", err)
	}
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
