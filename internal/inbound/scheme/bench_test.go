package scheme

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// BenchmarkVerify measures one verification per scheme with a 1 KiB body
// and one secret (the gateway's per-request cost before storage).
func BenchmarkVerify(b *testing.B) {
	body := `{"id":"evt_1","pad":"` + strings.Repeat("x", 1000) + `"}`
	now := time.Unix(testNow, 0)
	for _, sc := range schemeCases() {
		h := sc.sign(secretA, ts(testNow), body)
		c := sc.config(secretA)
		b.Run(sc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := Verify(c, h, []byte(body), now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDedupeKey measures the natural key of a Stripe event, whose id
// comes after a large nested object (the JSON scan's worst common case).
func BenchmarkDedupeKey(b *testing.B) {
	body := []byte(`{"object":"event","data":{"object":{"id":"pi_1","metadata":{"k":"` + strings.Repeat("v", 2000) + `"}}},"id":"evt_1"}`)
	b.Run("stripe-json-id", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := DedupeKey(Stripe, "", nil, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	h := http.Header{"X-Github-Delivery": {"72d3162e-cc78-11e3-81ab-4c9367dc0958"}}
	b.Run("github-header", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DedupeKey(GitHub, "", h, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
