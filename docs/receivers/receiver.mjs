// Verify Herald's X-Signature with node:crypto only (Node 18+).
// Run: HERALD_SECRET=whsec_… PORT=9000 node receiver.mjs
import { createHmac, timingSafeEqual } from "node:crypto";
import { createServer } from "node:http";

export function verifyHerald(secret, header, rawBody, nowSeconds = Math.floor(Date.now() / 1000)) {
  const parts = (header || "").split(",").map((p) => p.trim().split("="));
  const t = Number(parts.find(([k]) => k === "t")?.[1]);
  if (!Number.isInteger(t) || Math.abs(nowSeconds - t) > 300) return false; // replay window
  const mac = createHmac("sha256", Buffer.from(secret)); // the whole "whsec_…" string is the key
  mac.update(`${t}.`);
  mac.update(rawBody);
  const want = mac.digest();
  return parts
    .filter(([k]) => k === "v1")
    .some(([, hex]) => { const got = Buffer.from(hex ?? "", "hex"); return got.length === want.length && timingSafeEqual(got, want); });
}

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks); // verify the raw bytes, before any JSON parsing
    if (!verifyHerald(process.env.HERALD_SECRET, req.headers["x-signature"], raw)) {
      res.writeHead(400).end("bad signature\n");
      return;
    }
    const event = JSON.parse(raw);
    console.log(`verified ${event.id} ${event.type}`); // deduplicate on event.id
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT || 9000), "127.0.0.1");
