package interop

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/herald-webhooks/herald/webhook"
)

// The Node peers: the npm packages standardwebhooks@1.1.1 and svix@2.5.0,
// driven through node/verify.mjs (one process per test, JSON on stdin and
// stdout; see the script's header for the protocol).
//
// The test is skipped when node or node/node_modules is missing, unless
// HERALD_INTEROP_REQUIRE_NODE=1 (run.sh sets it), where that is a failure.

const (
	nodeDir        = "node"
	requireNodeEnv = "HERALD_INTEROP_REQUIRE_NODE"
)

var wantNodeVersions = map[string]string{"standardwebhooks": "1.1.1", "svix": "2.5.0"}

type nodeVerifyCase struct {
	Name    string            `json:"name"`
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	BodyB64 string            `json:"body_b64"`

	want  map[string]bool // library -> accepted
	body  []byte
	notes string
}

type nodeSignCase struct {
	Name      string `json:"name"`
	Secret    string `json:"secret"`
	MsgID     string `json:"msg_id"`
	Timestamp int64  `json:"timestamp"`
	BodyB64   string `json:"body_b64"`

	body []byte
}

type nodeVerdict struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

type nodeOutput struct {
	Node     string            `json:"node"`
	Versions map[string]string `json:"versions"`
	Verify   []struct {
		Name             string      `json:"name"`
		StandardWebhooks nodeVerdict `json:"standardwebhooks"`
		Svix             nodeVerdict `json:"svix"`
	} `json:"verify"`
	Sign []struct {
		Name             string `json:"name"`
		StandardWebhooks string `json:"standardwebhooks"`
		Svix             string `json:"svix"`
	} `json:"sign"`
}

func requireNode(t *testing.T) string {
	t.Helper()
	fail := t.Skipf
	if os.Getenv(requireNodeEnv) == "1" {
		fail = t.Fatalf
	}
	node, err := exec.LookPath("node")
	if err != nil {
		fail("Node interop tests skipped: node is not in PATH (install Node.js, then `npm ci --prefix interop/node`)")
	}
	for pkg := range wantNodeVersions {
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", pkg, "package.json")); err != nil {
			fail("Node interop tests skipped: %s is not installed; run `npm ci --prefix interop/node` (interop/run.sh does)", pkg)
		}
	}
	return node
}

func runNode(t *testing.T, node string, verify []nodeVerifyCase, sign []nodeSignCase) nodeOutput {
	t.Helper()
	in, err := json.Marshal(map[string]any{"verify": verify, "sign": sign})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "verify.mjs")
	cmd.Dir = nodeDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node verify.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	var out nodeOutput
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("node verify.mjs output: %v\n%s", err, stdout.String())
	}
	for pkg, want := range wantNodeVersions {
		if got := out.Versions[pkg]; got != want {
			t.Errorf("node_modules has %s %s, want %s (run `npm ci --prefix interop/node`)", pkg, got, want)
		}
	}
	t.Logf("node %s, standardwebhooks %s, svix %s", out.Node, out.Versions["standardwebhooks"], out.Versions["svix"])
	return out
}

// headerMap flattens headers for JSON, with lowercase names as a Node
// server sees them.
func headerMap(h http.Header) map[string]string {
	m := make(map[string]string, len(h))
	for k, v := range h {
		m[strings.ToLower(k)] = strings.Join(v, ", ")
	}
	return m
}

func TestNodePeers(t *testing.T) {
	node := requireNode(t)
	secret, oldSecret := newSecret(t), newSecret(t)
	now := time.Now()
	T := itoa(now.Unix())
	event := bodies()["herald event"]
	both := map[string]bool{"standardwebhooks": true, "svix": true}
	neither := map[string]bool{"standardwebhooks": false, "svix": false}

	var verify []nodeVerifyCase
	add := func(name, secret string, h http.Header, body []byte, want map[string]bool, notes string) {
		verify = append(verify, nodeVerifyCase{
			Name: name, Secret: secret, Headers: headerMap(h), BodyB64: base64.StdEncoding.EncodeToString(body),
			want: want, body: body, notes: notes,
		})
	}

	// Herald-signed deliveries, as the sender makes them.
	for name, body := range bodies() {
		add("herald-signed "+name, secret, heraldSign(t, "evt_2ZyH9q", now, body, secret), body, both, "")
	}
	add("official test secret", officialSecret, heraldSign(t, "evt_1", now, event, officialSecret), event, both, "")
	add("secret without whsec_", strings.TrimPrefix(secret, "whsec_"), heraldSign(t, "evt_1", now, event, secret), event, both, "")
	add("svix-* header names", secret, svixNames(heraldSign(t, "evt_1", now, event, secret)), event,
		map[string]bool{"standardwebhooks": false, "svix": true}, "standardwebhooks reads webhook-* only")
	rot := heraldSign(t, "evt_rot", now, event, secret, oldSecret)
	add("rotation, peer holds the new secret", secret, rot, event, both, "")
	add("rotation, peer holds the old secret", oldSecret, rot, event, both, "")
	add("rotation, peer holds a third secret", newSecret(t), rot, event, neither, "")
	add("tampered body", secret, heraldSign(t, "evt_1", now, event, secret), append(append([]byte(nil), event...), ' '), neither, "")
	add("6 min old", secret, heraldSign(t, "evt_1", now.Add(-6*time.Minute), event, secret), event, neither, "")
	add("6 min ahead", secret, heraldSign(t, "evt_1", now.Add(6*time.Minute), event, secret), event, neither, "")

	// Edge cases; Herald's verdict is computed below and compared.
	nonUTF8 := []byte("{\"id\":\"evt_bin\",\"raw\":\"\xff\xfe\"}")
	add("body not valid UTF-8", secret, heraldSign(t, "evt_bin", now, nonUTF8, secret), nonUTF8, neither,
		"the npm libraries decode a Buffer body as UTF-8 before signing, so bytes that are not UTF-8 change; Herald and the Go peers sign the raw bytes")
	sig, _ := webhook.SignStandard(secret, "msg_1", now.Unix(), event)
	hdr := func(ts, sig string) http.Header {
		return http.Header{"Webhook-Id": {"msg_1"}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
	}
	add("timestamp with trailing letters", secret, hdr(T+"abc", "v1,"+sig), event, both, "parseInt stops at the first non-digit")
	add("timestamp with a plus sign", secret, hdr("+"+T, "v1,"+sig), event, both, "parseInt accepts a sign")
	add("entry with a third comma part", secret, hdr(T, "v1,"+sig+",x"), event, both, "split(',') keeps the first two parts")
	mixed := hdr(T, "v1,"+sig)
	mixed.Set("Svix-Id", "msg_1")
	mixed.Set("Svix-Timestamp", T)
	mixed.Set("Svix-Signature", "v1,"+base64.StdEncoding.EncodeToString(make([]byte, 32)))
	add("valid webhook-*, invalid svix-*", secret, mixed, event, map[string]bool{"standardwebhooks": true, "svix": false}, "svix prefers svix-*")

	// Messages for the npm libraries to sign.
	var sign []nodeSignCase
	addSign := func(name, secret, id string, body []byte) {
		sign = append(sign, nodeSignCase{Name: name, Secret: secret, MsgID: id, Timestamp: now.Unix(), BodyB64: base64.StdEncoding.EncodeToString(body), body: body})
	}
	for name, body := range bodies() {
		addSign(name, secret, "msg_"+strings.ReplaceAll(name, " ", "_"), body)
	}
	addSign("old secret", oldSecret, "evt_rot", event)
	addSign("official secret", officialSecret, "msg_p5jXN8AQM9LWM0D4loKWxJek", []byte(`{"test": 2432232314}`))
	for i := 0; i < 20; i++ {
		// Random printable ASCII: valid UTF-8, so the npm libraries keep the bytes.
		b := randBytes(t, int(randInt(t, 512)))
		for j := range b {
			b[j] = ' ' + b[j]%95
		}
		addSign("random "+itoa(int64(i)), secret, randID(t), b)
	}

	out := runNode(t, node, verify, sign)

	if len(out.Verify) != len(verify) || len(out.Sign) != len(sign) {
		t.Fatalf("node answered %d verify and %d sign results for %d and %d cases", len(out.Verify), len(out.Sign), len(verify), len(sign))
	}
	for i, c := range verify {
		r := out.Verify[i]
		got := map[string]bool{"standardwebhooks": r.StandardWebhooks.OK, "svix": r.Svix.OK}
		errs := map[string]string{"standardwebhooks": r.StandardWebhooks.Error, "svix": r.Svix.Error}
		for lib, want := range c.want {
			if got[lib] != want {
				t.Errorf("%s: npm %s accepted=%v (%s), want %v", c.Name, lib, got[lib], errs[lib], want)
			}
		}
		h := http.Header{}
		for k, v := range c.Headers {
			h.Set(k, v)
		}
		h.Del(webhook.HeaderSignature) // compare the Standard Webhooks scheme only, as the npm libraries see it
		herald := heraldVerify(h, c.body, c.Secret) == nil
		if herald != got["standardwebhooks"] || herald != got["svix"] {
			t.Logf("DISAGREEMENT %-40s herald=%v npm standardwebhooks=%v svix=%v  %s", c.Name, herald, got["standardwebhooks"], got["svix"], c.notes)
		} else {
			t.Logf("agreement    %-40s herald=%v npm standardwebhooks=%v svix=%v", c.Name, herald, got["standardwebhooks"], got["svix"])
		}
	}

	for i, c := range sign {
		r := out.Sign[i]
		ours, err := webhook.SignStandard(c.Secret, c.MsgID, c.Timestamp, c.body)
		if err != nil {
			t.Fatal(err)
		}
		if r.StandardWebhooks != "v1,"+ours || r.Svix != "v1,"+ours {
			t.Errorf("%s: npm standardwebhooks %q, svix %q, Herald v1,%s", c.Name, r.StandardWebhooks, r.Svix, ours)
		}
		for lib, s := range map[string]string{"standardwebhooks": r.StandardWebhooks, "svix": r.Svix} {
			names := [3]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
			if lib == "svix" {
				names = [3]string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
			}
			h := http.Header{names[0]: {c.MsgID}, names[1]: {itoa(c.Timestamp)}, names[2]: {s}}
			// Herald holds the current and the old secret, as during a rotation.
			if err := heraldVerify(h, c.body, secret, oldSecret, officialSecret); err != nil {
				t.Errorf("%s: Herald rejects npm %s's signature: %v", c.Name, lib, err)
			}
		}
	}
}
