// Peer side of Herald's interoperability tests (driven by ../node_test.go).
//
// Reads one JSON document on stdin:
//
//   {
//     "verify": [{"name", "secret", "headers": {name: value}, "body_b64"}],
//     "sign":   [{"name", "secret", "msg_id", "timestamp", "body_b64"}]
//   }
//
// and writes one JSON document on stdout:
//
//   {
//     "node": "v22.x", "versions": {"standardwebhooks": "1.1.1", "svix": "2.5.0"},
//     "verify": [{"name", "standardwebhooks": {"ok", "error"}, "svix": {"ok", "error"}}],
//     "sign":   [{"name", "standardwebhooks": "v1,...", "svix": "v1,..."}]
//   }
//
// Bodies travel as base64 so that their bytes are exact; they are handed to
// the libraries as Buffers, as a Node receiver gets them from its framework.
// Timestamps are unix seconds. Verification uses the libraries' own clock
// (Date.now()), so the Go side signs with the current time.
import { readFileSync } from "node:fs";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";

const version = (pkg) =>
  JSON.parse(readFileSync(new URL(`./node_modules/${pkg}/package.json`, import.meta.url), "utf8")).version;

const input = JSON.parse(readFileSync(0, "utf8"));

function verdict(fn) {
  try {
    fn();
    return { ok: true };
  } catch (err) {
    return { ok: false, error: String(err && err.message ? err.message : err) };
  }
}

const out = {
  node: process.version,
  versions: { standardwebhooks: version("standardwebhooks"), svix: version("svix") },
  verify: [],
  sign: [],
};

for (const c of input.verify ?? []) {
  const body = Buffer.from(c.body_b64, "base64");
  out.verify.push({
    name: c.name,
    standardwebhooks: verdict(() => new StandardWebhook(c.secret).verify(body, c.headers, { jsonParse: false })),
    svix: verdict(() => new SvixWebhook(c.secret).verify(body, c.headers)),
  });
}

for (const c of input.sign ?? []) {
  const body = Buffer.from(c.body_b64, "base64");
  const at = new Date(c.timestamp * 1000);
  out.sign.push({
    name: c.name,
    standardwebhooks: new StandardWebhook(c.secret).sign(c.msg_id, at, body),
    svix: new SvixWebhook(c.secret).sign(c.msg_id, at, body),
  });
}

process.stdout.write(JSON.stringify(out) + "\n");
