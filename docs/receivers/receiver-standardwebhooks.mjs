// Verify Herald's Standard Webhooks signature with the standardwebhooks npm package.
// Run: npm install standardwebhooks; HERALD_SECRET=whsec_… PORT=9000 node receiver-standardwebhooks.mjs
import { createServer } from "node:http";
import { Webhook } from "standardwebhooks";

const wh = new Webhook(process.env.HERALD_SECRET); // the whsec_… secret as Herald shows it

createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let event;
    try {
      // the raw body, and the webhook-id / webhook-timestamp / webhook-signature headers
      event = wh.verify(Buffer.concat(chunks).toString("utf8"), req.headers);
    } catch {
      res.writeHead(400).end("bad signature\n");
      return;
    }
    console.log(`verified ${event.id} ${event.type}`); // deduplicate on event.id (= webhook-id)
    res.writeHead(204).end();
  });
}).listen(Number(process.env.PORT || 9000), "127.0.0.1");
