# Verify Herald's X-Signature with Python's standard library (3.8+).
# Run: HERALD_SECRET=whsec_... PORT=9000 python3 receiver.py
import hashlib, hmac, json, os, sys, time
from http.server import BaseHTTPRequestHandler, HTTPServer


def verify_herald(secret, header, raw_body, now=None):
    now = int(time.time()) if now is None else now
    pairs = [p.strip().split("=", 1) for p in (header or "").split(",") if "=" in p]
    ts = [v for k, v in pairs if k == "t"]
    # ASCII digits only ("²".isdigit() is true, int("²") raises), and few enough for int().
    if len(ts) != 1 or not (ts[0].isascii() and ts[0].isdigit()) or len(ts[0]) > 19:
        return False
    if abs(now - int(ts[0])) > 300:  # replay window
        return False
    # The whole "whsec_..." string is the key; the message is "<t>.<raw body>".
    want = hmac.new(secret.encode(), ts[0].encode() + b"." + raw_body, hashlib.sha256).hexdigest()
    # Compare bytes: compare_digest raises on a str holding non-ASCII characters.
    return any(hmac.compare_digest(v.encode(), want.encode()) for k, v in pairs if k == "v1")


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))  # the raw bytes
        if not verify_herald(os.environ["HERALD_SECRET"], self.headers.get("X-Signature"), raw):
            self.send_response(400)
            self.end_headers()
            return
        event = json.loads(raw)
        print(f"verified {event['id']} {event['type']}", flush=True)  # deduplicate on event["id"]
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), Receiver).serve_forever()
