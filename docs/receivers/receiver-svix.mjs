// Verify Herald's Standard Webhooks signature with the svix npm package (it accepts the unbranded webhook-* headers).
// Run: npm install svix; HERALD_SECRET=whsec_… PORT=9000 node receiver-svix.mjs
import { createServer } from "node:http";
import { Webhook } from "svix";

const wh = new Webhook(process.env.HERALD_SECRET); // the whsec_… secret as Herald shows it

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    try {
      wh.verify(raw, req.headers); // throws on a bad signature or an old timestamp (svix 2.x returns nothing)
    } catch {
      res.writeHead(400).end("bad signature\n");
      return;
    }
    const event = JSON.parse(raw);
    console.log(`verified ${event.id} ${event.type}`); // deduplicate on event.id (= webhook-id)
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT || 9000), "127.0.0.1");
