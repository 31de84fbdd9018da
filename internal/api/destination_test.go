package api_test

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/herald-webhooks/herald/internal/api"
	"github.com/herald-webhooks/herald/internal/egress"
)

// linkLocalDestinations are inbound source destinations on link-local or
// cloud-metadata addresses: refused whatever the source (the relaxed
// policy of destinations allows private addresses, not these).
var linkLocalDestinations = []string{
	"http://169.254.169.254/latest/meta-data/",
	"http://169.254.169.254:80/latest/meta-data/iam/security-credentials/",
	"http://169.254.170.2/v2/credentials",
	"http://[fe80::1]/hook",
	"https://[fe80::a:b:c:d]:8443/hook",
	"http://[fd00:ec2::254]/latest/meta-data/",
	"http://[fd20:ce::254]/computeMetadata/v1/",
	"http://100.100.100.200/latest/meta-data/",
	"http://[::ffff:169.254.169.254]/latest/meta-data/",
}

// privateDestinations are accepted: operators forward to internal services.
var privateDestinations = []string{
	"http://10.0.0.5/hook",
	"http://127.0.0.1:8080/hook",
	"http://[::1]:8080/hook",
	"http://localhost:8080/hook",
	"http://192.168.1.10/hook",
	"http://172.16.0.9:9000/hook",
	"http://[fd00::5]/hook",
	"https://billing.internal:8443/stripe",
}

func relaxedEgress(t *testing.T, cidrs ...string) *egress.Client {
	t.Helper()
	cfg := egress.Config{AllowHTTP: true, AllowLoopback: true, AllowPrivate: true}
	for _, c := range cidrs {
		cfg.AllowCIDRs = append(cfg.AllowCIDRs, netip.MustParsePrefix(c))
	}
	eg, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return eg
}

// wantLinkLocalRefusal checks a 422 naming body.destination_url, the rule
// blocked_address and why.
func wantLinkLocalRefusal(t *testing.T, what string, st int, raw []byte) {
	t.Helper()
	var p struct {
		Errors []struct{ Location, Message string }
	}
	_ = json.Unmarshal(raw, &p)
	if st != 422 || len(p.Errors) != 1 || p.Errors[0].Location != "body.destination_url" ||
		!strings.Contains(p.Errors[0].Message, "url rule "+egress.RuleBlockedAddress+": ") ||
		!strings.Contains(p.Errors[0].Message, "link-local or cloud metadata address") {
		t.Errorf("%s: %d %s; want 422 at body.destination_url naming url rule %s and the link-local or metadata rule", what, st, raw, egress.RuleBlockedAddress)
	}
}

// TestSourceDestinationNeverLinkLocalOrMetadata: creating or updating a
// source with a link-local or cloud-metadata destination answers 422
// naming the rule and stores nothing; private and loopback destinations
// are still accepted. Both with the destinations' client set as the server
// wires it and with the API's default.
func TestSourceDestinationNeverLinkLocalOrMetadata(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  func(*api.Config)
	}{
		{"Destinations set", func(c *api.Config) { c.Destinations = relaxedEgress(t) }},
		{"Destinations default", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, c.cfg)
			_, list := w.call(adminKey, "GET", "/v1/sources", "")
			_, endpoints := w.call(adminKey, "GET", "/v1/endpoints?kind=all", "")
			for _, dest := range linkLocalDestinations {
				st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"meta","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":`+strconvQuote(dest)+`}`)
				wantLinkLocalRefusal(t, "POST "+dest, st, raw)
			}
			if _, after := w.call(adminKey, "GET", "/v1/sources", ""); !bytes.Equal(after, list) {
				t.Errorf("refused creates changed the sources:\n%s\n%s", list, after)
			}
			if _, after := w.call(adminKey, "GET", "/v1/endpoints?kind=all", ""); !bytes.Equal(after, endpoints) {
				t.Errorf("refused creates changed the endpoints:\n%s\n%s", endpoints, after)
			}

			var src struct {
				ID             string `json:"id"`
				DestinationURL string `json:"destination_url"`
			}
			for _, dest := range privateDestinations {
				st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"internal","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":`+strconvQuote(dest)+`}`)
				if st != 201 {
					t.Errorf("POST %s: %d %s; want 201 (a private destination)", dest, st, raw)
					continue
				}
				if err := json.Unmarshal(raw, &src); err != nil || src.DestinationURL != dest {
					t.Fatalf("POST %s: %s (%v)", dest, raw, err)
				}
			}
			if src.ID == "" {
				t.Fatal("no source created")
			}

			_, before := w.call(adminKey, "GET", "/v1/sources/"+src.ID, "")
			for _, dest := range linkLocalDestinations {
				st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"name":"renamed","destination_url":`+strconvQuote(dest)+`}`)
				wantLinkLocalRefusal(t, "PATCH "+dest, st, raw)
			}
			if _, after := w.call(adminKey, "GET", "/v1/sources/"+src.ID, ""); !bytes.Equal(after, before) {
				t.Errorf("refused updates changed the source:\n%s\n%s", before, after)
			}
			for _, dest := range []string{"http://10.0.0.6/hook", "http://127.0.0.1:9090/hook"} {
				st, raw := w.call(adminKey, "PATCH", "/v1/sources/"+src.ID, `{"destination_url":`+strconvQuote(dest)+`}`)
				if st != 200 || json.Unmarshal(raw, &src) != nil || src.DestinationURL != dest {
					t.Errorf("PATCH %s: %d %s; want 200 with the new destination", dest, st, raw)
				}
			}
		})
	}
}

// TestSourceDestinationExplicitLinkLocalRange: an operator who lists a
// range inside the link-local prefix (--allow-cidr 169.254.10.0/24) may
// forward there; the rest of 169.254.0.0/16, metadata included, stays
// refused.
func TestSourceDestinationExplicitLinkLocalRange(t *testing.T) {
	w := newWorld(t, func(c *api.Config) { c.Destinations = relaxedEgress(t, "169.254.10.0/24") })
	if st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"appliance","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://169.254.10.10/hook"}`); st != 201 {
		t.Errorf("destination in the operator's range: %d %s; want 201", st, raw)
	}
	st, raw := w.call(adminKey, "POST", "/v1/sources", `{"name":"meta","scheme":"github","secrets":["sixteen-bytes-ok"],"destination_url":"http://169.254.169.254/latest/meta-data/"}`)
	wantLinkLocalRefusal(t, "metadata outside the operator's range", st, raw)
}
