// Browser tests of Herald's console: Debian's Chromium (/usr/bin/chromium)
// driven by playwright-core against a real `herald serve` built from this
// tree, with every request to anything but loopback blocked.
//
//   cd internal/console/e2e && npm ci && node console.test.mjs
//
// Environment: HERALD_BIN (a built herald; default: go build into a temp
// dir), CHROMIUM (default /usr/bin/chromium), SCREENSHOTS (directory for
// the page screenshots; default ../../../docs/ui).
import { chromium } from 'playwright-core';
import { spawn, execFileSync } from 'node:child_process';
import { createServer } from 'node:http';
import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHmac } from 'node:crypto';
import assert from 'node:assert/strict';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '../../..');
const shots = resolve(process.env.SCREENSHOTS || join(repo, 'docs/ui'));
mkdirSync(shots, { recursive: true });
const work = mkdtempSync(join(tmpdir(), 'herald-e2e-'));
const ADMIN = 'e2e-admin-key-0123456789abcdef0123456789';

let step = '';
const log = (s) => { step = s; console.log('• ' + s); };

// --- the receiver: /ok answers 200; /fail 500 with markup in the body;
// /flaky 503 until healed; /replayme 500 until replayHealed; /gone 410 (Herald disables the endpoint) until
// goneHealed; /retired 410 always; /forge is a page of another origin that posts to Herald
// without the CSRF token.
const received = [];
let healed = false;
let goneHealed = false;
let replayHealed = false;
let heraldBase = '';
let forgeTarget = '';
const receiver = createServer((req, res) => {
  let body = '';
  req.on('data', (c) => (body += c));
  req.on('end', () => {
    const path = req.url.split('?')[0];
    if (path === '/forge') {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<!doctype html><form id="f" method="post" action="${forgeTarget}"><input name="x" value="1"></form><script>document.getElementById('f').submit()</script>`);
      return;
    }
    received.push({ path, body, id: req.headers['webhook-id'], headers: req.headers });
    if (path.startsWith('/ok') || (path.startsWith('/flaky') && healed) || (path.startsWith('/gone') && goneHealed)) {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('thanks');
    } else if (path.startsWith('/replayme')) {
      res.writeHead(replayHealed ? 200 : 500, { 'content-type': 'text/plain' });
      res.end(replayHealed ? 'thanks' : 'not yet');
    } else if (path.startsWith('/gone') || path.startsWith('/retired')) {
      res.writeHead(410, { 'content-type': 'text/plain' });
      res.end('gone');
    } else if (path.startsWith('/down')) {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('service unavailable');
    } else if (path.startsWith('/fail')) {
      res.writeHead(500, { 'content-type': 'text/html' });
      res.end('<script>window.__xss=1</script><b id="injected">boom</b>');
    } else {
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('down for maintenance');
    }
  });
});

function listen(srv) {
  return new Promise((ok) => srv.listen(0, '127.0.0.1', () => ok(srv.address().port)));
}

function freePort() {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => ok(p)); });
  });
}

async function waitFor(what, fn, ms = 15000) {
  const until = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error('timed out waiting for ' + what);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function api(method, path, body, key = ADMIN) {
  const r = await fetch(heraldBase + path, {
    method, headers: { authorization: 'Bearer ' + key, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

const isLoopback = (u) => {
  const h = new URL(u).hostname;
  return h === '127.0.0.1' || h === '[::1]' || h === 'localhost';
};

async function newContext(browser, blocked) {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await ctx.route('**/*', (route) => {
    const u = route.request().url();
    if (u.startsWith('data:') || isLoopback(u)) return route.continue();
    blocked.push(u);
    return route.abort();
  });
  return ctx;
}

async function shot(page, name, fullPage = true) {
  await page.screenshot({ path: join(shots, name + '.png'), fullPage });
}

let herald, browser;
async function main() {
  const rport = await listen(receiver);
  const R = `http://127.0.0.1:${rport}`;

  let bin = process.env.HERALD_BIN;
  if (!bin) {
    log('build herald');
    bin = join(work, 'herald');
    execFileSync('go', ['build', '-o', bin, './cmd/herald'], { cwd: repo, stdio: 'inherit' });
  }
  const port = await freePort();
  heraldBase = `http://127.0.0.1:${port}`;
  log('start herald serve on ' + heraldBase);
  herald = spawn(bin, ['serve', '--dev', '--addr', `127.0.0.1:${port}`, '--db', 'sqlite:' + join(work, 'herald.db'),
    '--retry-schedule', '150ms', '--breaker-threshold', '7', '--breaker-cooldown', '1h'], {
    env: { ...process.env, HERALD_API_KEY: ADMIN }, stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitFor('herald ready', async () => { try { return (await fetch(heraldBase + '/readyz')).ok; } catch { return false; } });

  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'],
  });
  const blocked = [];
  const ctx = await newContext(browser, blocked);
  const page = await ctx.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push(m.text()); });

  log('GET / leads to the console sign-in');
  await page.goto(heraldBase + '/');
  assert.match(page.url(), /\/ui\/sign-in/);
  await shot(page, 'sign-in');

  log('a wrong key is refused');
  await page.fill('#key', 'herald_key_wrong');
  await page.click('#signin button[type=submit]');
  await page.waitForSelector('.error');
  assert.match(await page.textContent('.error'), /invalid API key/);

  log('sign in with the admin key');
  await page.fill('#key', ADMIN);
  await page.click('#signin button[type=submit]');
  await page.waitForURL(heraldBase + '/ui/');
  assert.match(await page.textContent('[data-testid=who]'), /admin/);
  const cookies = await ctx.cookies();
  const sess = cookies.find((c) => c.name === 'herald_console');
  assert.ok(sess && sess.httpOnly && sess.sameSite === 'Strict', 'session cookie HttpOnly, SameSite=Strict');

  log('catalogue an event type with two versions (the example carries markup)');
  const shipSchema = { type: 'object', properties: { parcel: { type: 'string' }, carrier: { type: 'string' } }, required: ['parcel'] };
  assert.equal((await api('POST', '/v1/event-types', { name: 'shipment.sent', description: 'a parcel left the <b>warehouse</b>',
    versions: [{ version: 1, schema: shipSchema, example: { parcel: '<b id="injected">P-1</b>' } }] })).status, 201);
  assert.equal((await api('POST', '/v1/event-types/shipment.sent/versions', { version: 2,
    schema: { ...shipSchema, required: ['parcel', 'carrier'] }, example: { parcel: 'P-2', carrier: 'DHL' } })).status, 201);

  log('create an endpoint from the page (description and URL carry markup; a pinned version)');
  const descXSS = '<img src=x onerror="window.__xss=1"><b>Billing</b> hooks';
  const urlXSS = `${R}/ok?q=<b>u</b>"><img/src=x>`;
  await page.click('text=Endpoints');
  await page.click('text=New endpoint');
  await page.fill('input[name=tenant]', 'acme');
  await page.fill('input[name=url]', urlXSS);
  await page.fill('input[name=description]', descXSS);
  await page.fill('textarea[name=event_types]', 'order.<b>x</b>');
  await page.fill('textarea[name=versions]', 'shipment.sent: 1');
  assert.match(await page.textContent('[data-testid=catalog-hint]'), /shipment\.sent v1, v2/, 'the form lists the catalog');
  await shot(page, 'endpoint-new');
  await page.click('#endpoint-form button[type=submit]');
  await page.waitForSelector('.error');
  assert.match(await page.textContent('.error'), /event type/, 'an event type with markup is refused by the API rule');
  assert.equal(await page.inputValue('textarea[name=versions]'), 'shipment.sent: 1', 'the pin is kept after a refusal');
  await page.fill('textarea[name=event_types]', 'order.*\nherald.test\nshipment.*');
  await page.click('#endpoint-form button[type=submit]');
  await page.waitForSelector('[data-testid=secret]');
  const secret1 = (await page.textContent('[data-testid=secret]')).trim();
  assert.match(secret1, /^whsec_/);
  await shot(page, 'endpoint-created');
  const endpointCount = async () => (await api('GET', '/v1/endpoints?limit=1000')).body.data.length;
  const nEndpoints = await endpointCount();
  await page.click('text=Go to the endpoint');
  // The endpoint's page fully loaded before Back: a Back while that
  // navigation is still going raced Chromium's history ("Not attached to
  // an active page", once in CI).
  await page.waitForURL(/\/ui\/endpoints\/ep_[^/?#]+$/);
  const epOK = page.url().split('/ui/endpoints/')[1];
  assert.match(epOK, /^ep_/);

  log('Back, Forward and reload after a create repeat nothing and show the secret no more');
  await page.goBack();
  assert.equal(await page.$('[data-testid=secret]'), null, 'Back shows the new secret again');
  assert.match(await page.textContent('.flash'), /shown once/);
  await page.goForward();
  await page.reload();
  assert.equal(await endpointCount(), nEndpoints, 'Back/Forward or reload created another endpoint');
  assert.equal((await page.textContent('[data-testid=description]')).trim(), descXSS, 'description renders as text');
  assert.equal(await page.textContent('h1'), urlXSS, 'URL renders as text');
  assert.match(await page.textContent('[data-testid=pins]'), /shipment\.sent v1/, 'the pinned version is shown');
  assert.equal((await api('GET', `/v1/endpoints/${epOK}`)).body.versions['shipment.sent'], 1, 'the API has the pin');

  log('edit the endpoint: pin the newest version, add a header and a rate limit');
  await page.click('.actions >> text=Edit');
  assert.equal((await page.inputValue('textarea[name=versions]')).trim(), 'shipment.sent: 1');
  await page.fill('textarea[name=versions]', 'shipment.sent: 2');
  await page.fill('textarea[name=headers]', 'X-Team: billing\nX-Env: e2e');
  await page.fill('input[name=rate_limit_per_second]', '25');
  await page.click('#endpoint-form button[type=submit]');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('[data-testid=pins]'), /shipment\.sent v2/);
  assert.match(await page.textContent('[data-testid=settings]'), /rate limit: 25\/s\s*headers: X-Env, X-Team/);
  assert.ok(!(await page.textContent('main')).includes('billing'), 'a header\'s value (a credential) is not on the page');
  {
    const e = (await api('GET', `/v1/endpoints/${epOK}`)).body;
    assert.deepEqual(e.headers, { 'X-Team': 'billing', 'X-Env': 'e2e' }, 'the API has the headers: ' + JSON.stringify(e.headers));
    assert.equal(e.rate_limit_per_second, 25, 'the API has the rate limit');
  }
  await page.click('.actions >> text=Edit');
  assert.equal(await page.inputValue('textarea[name=headers]'), 'X-Env: e2e\nX-Team: billing\n', 'the edit form shows the headers');
  assert.equal(await page.inputValue('input[name=rate_limit_per_second]'), '25');
  await page.click('#endpoint-form >> text=Cancel');
  await page.waitForURL(/\/ui\/endpoints\/ep_[^/?#]+$/);

  log('send a test event and see the attempt');
  await page.click('text=Send test event');
  await page.waitForSelector('[data-testid=test-attempt]');
  assert.match(await page.textContent('[data-testid=test-attempt]'), /HTTP 200/);
  assert.match(await page.textContent('[data-testid=test-attempt]'), /thanks/);
  await shot(page, 'endpoint-test');
  const testGot = received.filter((x) => x.body.includes('herald.test'));
  assert.equal(testGot.length, 1, 'the receiver got the test event once');
  assert.equal(testGot[0].headers['x-team'], 'billing', 'the test event carries the endpoint\'s header');

  log('reveal the signing secret');
  await page.click('text=Back to the endpoint');
  await page.click('.actions button:has-text("Reveal secret")');
  await page.waitForSelector('[data-testid=secret]');
  assert.equal((await page.textContent('h1')).trim(), 'Signing secret');
  assert.equal((await page.textContent('[data-testid=secret]')).trim(), secret1, 'the revealed secret is the one shown at creation');

  log('endpoints of two tenants, a failing one and a flaky one');
  const epFail = (await api('POST', '/v1/endpoints', { tenant: 'acme', url: `${R}/fail`, description: 'always 500' })).body.id;
  const epFlaky = (await api('POST', '/v1/endpoints', { tenant: 'acme', url: `${R}/flaky`, event_types: ['invoice.*'] })).body.id;
  const epOther = (await api('POST', '/v1/endpoints', { tenant: 'globex', url: `${R}/ok/globex`, description: 'globex only' })).body.id;
  const epDown = (await api('POST', '/v1/endpoints', { tenant: 'initech', url: `${R}/down`, description: 'down for good', event_types: ['ping.*'] })).body.id;
  assert.ok(epFail && epFlaky && epOther && epDown);
  await api('PATCH', `/v1/endpoints/${epFail}`, { event_types: ['order.*'] });
  await api('PATCH', `/v1/endpoints/${epOK}`, { event_types: ['shipment.*', 'herald.test'] });

  log('publish events through the API');
  const payloadXSS = { note: '<script>window.__xss=1</script>', html: '<b id="injected">bold</b>' };
  const pub = await api('POST', '/v1/events', { tenant: 'acme', type: 'order.created', id: 'ord-1001', data: payloadXSS });
  assert.equal(pub.status, 202);
  for (let i = 0; i < 3; i++) {
    assert.equal((await api('POST', '/v1/events', { tenant: 'acme', type: 'invoice.paid', id: 'inv-' + i, data: { n: i } })).status, 202);
  }
  const other = await api('POST', '/v1/events', { tenant: 'globex', type: 'order.created', id: 'gx-1', data: { n: 1 } });
  assert.equal(other.status, 202);
  assert.equal((await api('POST', '/v1/events', { tenant: 'acme', type: 'order.<b>x</b>', data: {} })).status, 422, 'markup in an event type is refused');
  await waitFor('4 dead letters on acme', async () => {
    const d = await api('GET', '/v1/dead-letters?tenant=acme');
    return d.body.data.reduce((n, x) => n + x.count, 0) === 4;
  });
  for (let i = 0; i < 4; i++) {
    assert.equal((await api('POST', '/v1/events', { tenant: 'initech', type: 'ping.sent', data: { n: i } })).status, 202);
  }
  await waitFor('the down endpoint\'s circuit opens (7 failures in a row)', async () =>
    (await api('GET', `/v1/endpoints/${epDown}`)).body.circuit?.state === 'open');
  // The 8th attempt may have been in flight when the circuit opened, so its
  // delivery may be dead already: one more event is held by the open circuit
  // (cool-down 1h) for certain.
  const held = await api('POST', '/v1/events', { tenant: 'initech', type: 'ping.sent', id: 'ping-held', data: { n: 4 } });
  assert.equal(held.status, 202);
  await waitFor('the open circuit holds the new delivery', async () => {
    const d = await api('GET', `/v1/endpoints/${epDown}/deliveries`);
    return d.body.data.some((x) => x.event_id === 'ping-held' && x.state === 'pending');
  });
  const otherDelivery = await waitFor('globex delivery', async () => {
    const d = await api('GET', `/v1/endpoints/${epOther}/deliveries`);
    return d.body.data[0]?.id;
  });

  log('overview');
  await page.goto(heraldBase + '/ui/');
  assert.match(await page.textContent('main'), /Dead letters per endpoint/);
  assert.ok(await page.$('svg.chart rect.bar-dead'), 'the chart draws the dead letters');
  assert.equal((await page.textContent('[data-testid=open-circuits]')).trim(), '1', 'one open circuit');
  assert.match(await page.textContent(`[data-testid=failing] tr:has(a[href="/ui/endpoints/${epDown}"])`), /open\s*probe in/, 'the failing endpoint shows its open circuit');
  {
    // Queue depth and the oldest due delivery are the API's pending deliveries.
    const pending = (await api('GET', '/v1/deliveries?state=pending&limit=1000')).body.data;
    assert.ok(pending.length >= 1, 'the open circuit holds a pending delivery');
    assert.equal((await page.textContent('[data-testid=queue-depth]')).trim(), String(pending.length), 'queue depth');
    const due = pending.filter((x) => x.next_attempt_at && !x.in_flight).sort((a, b) => Date.parse(a.next_attempt_at) - Date.parse(b.next_attempt_at));
    const href = await page.getAttribute('[data-testid=oldest-due] a', 'href');
    assert.ok(due.some((x) => x.next_attempt_at === due[0].next_attempt_at && href === `/ui/deliveries/${x.id}`), `oldest due ${href}, want ${due[0].id}`);
    // Dead letters per endpoint: the API's counts, every endpoint with any.
    const counts = (await api('GET', '/v1/dead-letters')).body.data;
    assert.ok(counts.length >= 3);
    assert.equal(await page.$$eval('[data-testid=dead-per-endpoint] [data-count-for]', (e) => e.length), counts.length);
    for (const c of counts) {
      assert.equal((await page.textContent(`[data-testid=dead-per-endpoint] [data-count-for="${c.endpoint_id}"]`)).trim(), String(c.count), 'dead letters of ' + c.endpoint_id);
    }
    // Two charts (hour, day), their dead bars adding up to the dead letters of the hour.
    assert.equal(await page.$$eval('svg.chart', (e) => e.length), 2);
    const deadBars = await page.$$eval('svg.chart', (svgs) => svgs.map((g) => [...g.querySelectorAll('rect.bar-dead title')]
      .reduce((n, t) => n + Number(/: (\d+) dead$/.exec(t.textContent)[1]), 0)));
    const dead = counts.reduce((n, c) => n + c.count, 0);
    assert.deepEqual(deadBars, [dead, dead], 'dead bars of the hour and the day: ' + deadBars);
  }
  await shot(page, 'overview');

  log('endpoints list');
  await page.goto(heraldBase + '/ui/endpoints');
  assert.match(await page.textContent('[data-testid=endpoints]'), /always 500/);
  assert.equal(await page.getAttribute(`tr[data-endpoint="${epDown}"] [data-circuit]`, 'data-circuit'), 'open', 'live breaker state in the list');
  assert.equal(await page.getAttribute(`tr[data-endpoint="${epOK}"] [data-circuit]`, 'data-circuit'), 'closed');
  // Health is the last day's stats (GET /v1/endpoints/{id}/stats?window=24h).
  const flakyStats = (await api('GET', `/v1/endpoints/${epFlaky}/stats?window=24h`)).body;
  assert.ok(flakyStats.attempts >= 3 && flakyStats.successes === 0, `stats of the failing endpoint: ${JSON.stringify(flakyStats)}`);
  assert.match(await page.textContent(`tr[data-endpoint="${epFlaky}"]`), new RegExp(`0%\\s*of ${flakyStats.attempts}[\\s\\S]*≤ ${Math.round(flakyStats.duration.p95_ms)} ms[\\s\\S]*never`), 'health of a failing endpoint: success rate, p95, no success');
  assert.match(await page.textContent(`tr[data-endpoint="${epOther}"]`), /100%\s*of 1[\s\S]*\d+ ms[\s\S]*s ago/, 'health of a healthy endpoint: success rate, p95, last success');
  await shot(page, 'endpoints');

  log('event catalog: types, versions, schemas, examples (as text)');
  await page.click('nav >> text=Event catalog');
  assert.match(await page.textContent('[data-testid=catalog] tr[data-type="shipment.sent"]'), /v1\s*v2/);
  assert.match(await page.textContent('[data-testid=catalog]'), /a parcel left the <b>warehouse<\/b>/, 'description as text');
  await shot(page, 'catalog');
  await page.click('[data-testid=catalog] >> text=shipment.sent');
  await page.waitForSelector('[data-testid=schema]');
  assert.equal(await page.$$eval('[data-testid=schema]', (e) => e.length), 2);
  assert.match((await page.$$eval('[data-testid=example]', (e) => e.map((x) => x.textContent))).join(''), /<b id=\\"injected\\">P-1<\/b>/, 'example as text');
  assert.equal(await page.$('#injected'), null);
  await shot(page, 'event-type');

  log('find the event by id, open it: payload and the failed attempt\'s response excerpt as text');
  await page.click('nav >> text=Events');
  await page.fill('#event-search input[name=id]', 'ord-1001');
  await page.fill('#event-search input[name=tenant]', 'acme');
  await page.click('#event-search button[type=submit]');
  await page.click('[data-testid=events] >> text=ord-1001');
  await page.waitForSelector('[data-testid=payload]');
  const payloadText = await page.textContent('[data-testid=payload]');
  assert.ok(payloadText.includes(JSON.stringify(payloadXSS.note)) && payloadText.includes(JSON.stringify(payloadXSS.html)), 'payload shown as text: ' + payloadText);
  assert.match(await page.textContent('main'), /HTTP 500/);
  const excerpts = await page.$$eval('pre.excerpt', (els) => els.map((e) => e.textContent));
  assert.ok(excerpts.some((t) => t.includes('<b id="injected">boom</b>')), 'response excerpt shown as text');
  assert.equal(await page.$('#injected'), null, 'no markup from stored data became an element');
  assert.equal(await page.evaluate(() => window.__xss), undefined, 'no stored script ran');
  await shot(page, 'event');
  await page.goto(heraldBase + '/ui/events?tenant=acme');
  await shot(page, 'events');

  log('endpoint detail with deliveries, and a delivery with its attempts');
  await page.goto(`${heraldBase}/ui/endpoints/${epFail}`);
  await page.click('[data-testid=deliveries] a[href^="/ui/deliveries/"]');
  assert.match(await page.textContent('main'), /boom/);
  await shot(page, 'delivery');
  await page.goto(`${heraldBase}/ui/endpoints/${epFlaky}?state=dead`);
  assert.equal(await page.$$eval('[data-testid=deliveries] a[href^="/ui/deliveries/"]', (a) => a.length), 3);
  await shot(page, 'endpoint');

  log('pause and resume an endpoint; delete one through its confirmation page');
  await page.goto(`${heraldBase}/ui/endpoints/${epFail}`);
  await page.click('.actions button:has-text("Pause")');
  await page.waitForSelector('.flash');
  assert.equal((await page.textContent('[data-testid=state]')).trim(), 'paused');
  await page.click('.actions button:has-text("Resume")');
  await page.waitForSelector('.flash');
  assert.equal((await page.textContent('[data-testid=state]')).trim(), 'enabled');

  log('an endpoint Herald disabled (410 Gone) is enabled from its page');
  const ep410 = (await api('POST', '/v1/endpoints', { tenant: 'initech', url: `${R}/gone`, description: 'answers 410', event_types: ['gone.*'] })).body.id;
  assert.equal((await api('POST', '/v1/events', { tenant: 'initech', type: 'gone.now', id: 'gone-1', data: {} })).status, 202);
  await waitFor('the 410 disables the endpoint', async () => (await api('GET', `/v1/endpoints/${ep410}`)).body.state === 'disabled');
  await page.goto(`${heraldBase}/ui/endpoints/${ep410}`);
  assert.equal((await page.textContent('[data-testid=state]')).trim(), 'disabled');
  assert.equal(await page.$('.actions button:has-text("Pause")'), null, 'no Pause on a disabled endpoint');
  // An event published while it is disabled is held until it is enabled.
  assert.equal((await api('POST', '/v1/events', { tenant: 'initech', type: 'gone.now', id: 'gone-2', data: {} })).status, 202);
  await waitFor('the new delivery is held', async () =>
    (await api('GET', `/v1/endpoints/${ep410}/deliveries?state=paused`)).body.data.length === 1);
  goneHealed = true;
  await page.click('.actions button:has-text("Enable")');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('.flash'), /is enabled; 1 held deliveries released/);
  assert.equal((await page.textContent('[data-testid=state]')).trim(), 'enabled');
  await waitFor('the held delivery is delivered once enabled', async () =>
    (await api('GET', `/v1/endpoints/${ep410}/deliveries?state=succeeded`)).body.data.length === 1);
  assert.ok(received.some((x) => x.path === '/gone' && x.body.includes('"gone-2"')), 'the receiver got the held event');

  const epGone = (await api('POST', '/v1/endpoints', { tenant: 'initech', url: `${R}/ok/gone`, description: 'to be deleted' })).body.id;
  await page.goto(`${heraldBase}/ui/endpoints/${epGone}`);
  await page.click('.actions >> text=Delete…');
  assert.match(await page.textContent('h1'), new RegExp(`Delete endpoint ${epGone}\\?`));
  assert.equal((await api('GET', `/v1/endpoints/${epGone}`)).status, 200, 'nothing deleted before the confirmation');
  await page.click('button:has-text("Delete endpoint")');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('.flash'), /deleted/);
  assert.equal((await api('GET', `/v1/endpoints/${epGone}`)).status, 404);

  log('select two dead letters, replay them with the confirmation');
  healed = true;
  const beforeReplay = received.length;
  await page.goto(`${heraldBase}/ui/dead-letters?endpoint=${epFlaky}`);
  assert.equal((await page.textContent('[data-testid=dead-total]')).trim(), '3');
  const boxes = await page.$$('#replay-selected input[name=id]');
  const picked = [await boxes[0].getAttribute('value'), await boxes[1].getAttribute('value')];
  await boxes[0].check();
  await boxes[1].check();
  await shot(page, 'dead-letters');
  await page.click('text=Replay selected…');
  await page.waitForSelector('[data-testid=confirm]');
  assert.match(await page.textContent('[data-testid=confirm]'), /Replay 2 dead letter/);
  await shot(page, 'replay-confirm');
  await page.click('button:has-text("Replay 2 dead letter")');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('.flash'), /Replayed 2 dead letter/);
  assert.equal((await page.textContent('[data-testid=dead-total]')).trim(), '1', 'the count dropped to 1');
  await waitFor('the receiver got the two replays', async () => {
    const ok = [];
    for (const id of picked) {
      const d = await api('GET', `/v1/deliveries/${id}`);
      ok.push(d.body.state === 'succeeded');
    }
    return ok.every(Boolean);
  });
  {
    // The receiver got exactly those two events again (and nothing else at /flaky).
    const events = [];
    for (const id of picked) events.push((await api('GET', `/v1/deliveries/${id}`)).body.event_id);
    const again = received.slice(beforeReplay).filter((x) => x.path.startsWith('/flaky'));
    assert.equal(again.length, 2, 'the receiver got two replays: ' + again.map((x) => x.body).join(' | '));
    for (const ev of events) assert.ok(again.some((x) => x.body.includes(JSON.stringify(ev))), 'the receiver got ' + ev);
  }

  log('replay the rest by time (empty since/until: every dead letter until now), through the confirmation');
  await page.click('#replay-range button[type=submit]');
  await page.waitForSelector('[data-testid=confirm]');
  assert.match(await page.textContent('[data-testid=confirm]'), /Replay 1 dead letter/);
  await page.click('button:has-text("Replay 1 dead letter")');
  await page.waitForSelector('.flash');
  assert.equal((await page.textContent('[data-testid=dead-total]')).trim(), '0', 'the count dropped to 0');
  await waitFor('the receiver got the third replay', async () => (await api('GET', `/v1/dead-letters?tenant=acme`)).body.data
    .every((x) => x.endpoint_id !== epFlaky) && (await api('GET', `/v1/endpoints/${epFlaky}/deliveries?state=succeeded`)).body.data.length === 3);
  await page.goto(`${heraldBase}/ui/dead-letters`);
  await shot(page, 'dead-letters-all');

  log('dead letters across endpoints: select all, the confirmation counts them, Cancel replays nothing');
  {
    const counts = (await api('GET', '/v1/dead-letters')).body.data;
    const total = counts.reduce((n, c) => n + c.count, 0);
    assert.ok(counts.length >= 2 && total >= 2, 'dead letters of several endpoints: ' + JSON.stringify(counts));
    assert.equal((await page.textContent('[data-testid=dead-total]')).trim(), String(total));
    const boxes = '#replay-selected input[name=id]';
    assert.equal(await page.$$eval(boxes, (b) => b.filter((x) => x.checked).length), 0);
    await page.check('#select-all');
    assert.equal(await page.$$eval(boxes, (b) => b.filter((x) => x.checked).length), total, 'select all checks every dead letter on the page');
    await page.uncheck('#select-all');
    assert.equal(await page.$$eval(boxes, (b) => b.filter((x) => x.checked).length), 0, 'and unchecks them');
    await page.check('#select-all');
    await page.click('text=Replay selected…');
    await page.waitForSelector('[data-testid=confirm]');
    assert.match(await page.textContent('[data-testid=confirm]'), new RegExp(`Replay ${total} dead letter`));
    await page.click('a:text-is("Cancel")');
    await page.waitForURL(/\/ui\/dead-letters/);
    assert.equal((await page.textContent('[data-testid=dead-total]')).trim(), String(total), 'Cancel replayed nothing');
    assert.deepEqual((await api('GET', '/v1/dead-letters')).body.data, counts);
  }

  log('rotating with overlap none needs its confirmation box; without it nothing is rotated');
  {
    const before = (await api('GET', `/v1/endpoints/${epOK}/secret`)).body.secret;
    const nBefore = (await api('GET', `/v1/endpoints/${epOK}/secrets`)).body.data.length;
    await page.goto(`${heraldBase}/ui/endpoints/${epOK}`);
    assert.equal(await page.isChecked('#rotate input[name=expire_now]'), false, 'the box starts unticked');
    await page.selectOption('#rotate select[name=overlap_seconds]', '0');
    const refused = page.waitForResponse((r) => r.url().endsWith(`/ui/endpoints/${epOK}/rotate`));
    await page.click('#rotate button[type=submit]');
    assert.equal((await refused).status(), 422);
    await page.waitForSelector('.error');
    assert.match(await page.textContent('.error'), /^The current secret stops working now: tick it to rotate with overlap none/);
    assert.equal(await page.$eval('#rotate select[name=overlap_seconds]', (s) => s.value), '0', 'the overlap chosen is kept');
    assert.equal(await page.$('[data-testid=secret]'), null, 'no secret shown');
    assert.equal((await api('GET', `/v1/endpoints/${epOK}/secret`)).body.secret, before, 'the secret is unchanged');
    assert.equal((await api('GET', `/v1/endpoints/${epOK}/secrets`)).body.data.length, nBefore, 'no secret added');
    await page.setViewportSize({ width: 1280, height: 800 });
    await shot(page, 'secret-rotate-confirm', false);
    await page.setViewportSize({ width: 1280, height: 900 });
    // Ticked, on the page that came back: rotated, the old secret dropped at once.
    await page.check('#rotate input[name=expire_now]');
    await page.click('#rotate button[type=submit]');
    await page.waitForSelector('[data-testid=overlap]');
    assert.match(await page.textContent('[data-testid=overlap]'), /dropped at once/);
    const now = (await api('GET', `/v1/endpoints/${epOK}/secret`)).body.secret;
    assert.notEqual(now, before);
    assert.equal((await page.textContent('[data-testid=secret]')).trim(), now);
    assert.equal((await api('GET', `/v1/endpoints/${epOK}/secrets`)).body.data.length, 1, 'only the new secret is active');
  }

  log('rotate a secret');
  await page.goto(`${heraldBase}/ui/endpoints/${epOK}`);
  await page.click('#rotate button[type=submit]');
  await page.waitForSelector('[data-testid=overlap]');
  const secret2 = (await page.textContent('[data-testid=secret]')).trim();
  assert.match(secret2, /^whsec_/);
  assert.notEqual(secret2, secret1);
  assert.match(await page.textContent('[data-testid=overlap]'), /previous secret also signs until/);
  await shot(page, 'secret-rotated');
  const nSecrets = (await api('GET', `/v1/endpoints/${epOK}/secrets`)).body.data.length;
  await page.reload();
  assert.equal(await page.$('[data-testid=secret]'), null, 'a reload shows the rotated secret again');
  assert.equal((await api('GET', `/v1/endpoints/${epOK}/secrets`)).body.data.length, nSecrets, 'a reload rotated again');

  log('replay one dead delivery from its own page; a viewer gets no Replay button');
  {
    const ep = (await api('POST', '/v1/endpoints', { tenant: 'acme', url: `${R}/replayme`, event_types: ['refund.*'] })).body.id;
    assert.equal((await api('POST', '/v1/events', { tenant: 'acme', type: 'refund.issued', id: 'ref-1', data: { n: 1 } })).status, 202);
    const dead = await waitFor('the delivery is dead', async () =>
      (await api('GET', `/v1/endpoints/${ep}/deliveries?state=dead`)).body.data[0]);
    const vkey = (await api('POST', '/v1/api-keys', { name: 'replay viewer', role: 'viewer', tenant: 'acme' })).body.key;
    const vctx = await newContext(browser, blocked);
    const vpage = await vctx.newPage();
    await vpage.goto(heraldBase + '/ui/sign-in');
    await vpage.fill('#key', vkey);
    await vpage.click('#signin button[type=submit]');
    await vpage.waitForURL(heraldBase + '/ui/');
    await vpage.goto(`${heraldBase}/ui/deliveries/${dead.id}`);
    assert.match(await vpage.textContent('main'), /dead/);
    assert.equal(await vpage.$('#replay-delivery'), null, 'a viewer sees no Replay');
    const vtoken = await vpage.$eval('input[name=csrf]', (i) => i.value);
    const forgedReplay = await vctx.request.post(`${heraldBase}/ui/deliveries/${dead.id}/replay`, { form: { csrf: vtoken } });
    assert.equal(forgedReplay.status(), 403, 'a viewer\'s replay is refused');
    await vctx.close();
    assert.equal((await api('GET', `/v1/deliveries/${dead.id}`)).body.state, 'dead', 'the refused replay changed nothing');

    await page.goto(`${heraldBase}/ui/deliveries/${dead.id}`);
    await page.waitForSelector('#replay-delivery button:has-text("Replay")');
    await page.setViewportSize({ width: 1280, height: 800 });
    await shot(page, 'delivery-dead', false);
    replayHealed = true;
    const n = received.filter((x) => x.path === '/replayme').length;
    await page.click('#replay-delivery button[type=submit]');
    await page.waitForSelector('.flash');
    assert.equal(page.url(), `${heraldBase}/ui/deliveries/${dead.id}`, 'the replay comes back to the delivery');
    assert.match(await page.textContent('.flash'), /^Replayed 1 dead letter\(s\)\.$/);
    await shot(page, 'delivery-replayed', false);
    await page.setViewportSize({ width: 1280, height: 900 });
    await waitFor('the replayed delivery succeeds', async () => (await api('GET', `/v1/deliveries/${dead.id}`)).body.state === 'succeeded');
    assert.equal(received.filter((x) => x.path === '/replayme').length, n + 1, 'the receiver got it once more');
    assert.equal((await api('DELETE', `/v1/endpoints/${ep}`)).status, 204);
  }

  log('a new source the API refuses comes back as typed, saying the secrets typed were not kept');
  await page.goto(heraldBase + '/ui/sources');
  await page.fill('input[name=name]', '   ');
  await page.fill('textarea[name=secrets]', 'whsec_test_secret_for_e2e');
  await page.fill('input[name=destination_url]', `${R}/fail/stripe`);
  await page.fill('input[name=max_body_bytes]', '4096');
  await page.click('button:has-text("Create source")');
  await page.waitForSelector('.error');
  assert.match(await page.textContent('.error'), /^Name: must not be blank \(a character other than spaces\)[^;]*\. The secrets typed were not kept \(they are never sent back to the browser\): type them again\.$/);
  assert.equal(await page.inputValue('textarea[name=secrets]'), '', 'the refused form sent the secrets back');
  assert.equal(await page.inputValue('input[name=destination_url]'), `${R}/fail/stripe`, 'the refused form lost the destination');
  assert.equal(await page.inputValue('input[name=max_body_bytes]'), '4096', 'the refused form lost the body cap');
  assert.equal((await api('GET', '/v1/sources')).body.data.length, 0, 'a refused form created a source');
  await shot(page, 'source-new-refused');

  log('inbound sources: create one from the page');
  await page.goto(heraldBase + '/ui/sources');
  await page.fill('input[name=name]', 'stripe-live');
  await page.fill('textarea[name=secrets]', 'whsec_test_secret_for_e2e');
  await page.fill('input[name=destination_url]', `${R}/fail/stripe`);
  await page.click('button:has-text("Create source")');
  await page.waitForURL(/\/ui\/sources\/src_[^/?#]+$/);
  const src = (await api('GET', '/v1/sources')).body.data.find((x) => x.name === 'stripe-live');
  assert.ok(src, 'the source is created');
  assert.match(await page.textContent('.flash'), new RegExp(`created: providers POST to ${src.ingest_path}`));
  await page.reload();
  assert.equal((await api('GET', '/v1/sources')).body.data.length, 1, 'a reload created another source');
  await page.goto(heraldBase + '/ui/sources');
  assert.match(await page.textContent(`[data-testid=sources] tr:has(a[href="/ui/sources/${src.id}"])`), /stripe[\s\S]*\/fail\/stripe[\s\S]*1/);
  assert.equal(await page.$('[data-testid=forwarding-state]'), null, 'an enabled forwarding endpoint is shown as holding forwards');

  log('a signed provider event is forwarded; its failure is a dead letter on the source\'s page');
  const ingest = async (secret, id) => {
    const body = JSON.stringify({ id, object: 'event', type: 'charge.succeeded', data: { object: { id: 'ch_1' } } });
    const t = Math.floor(Date.now() / 1000);
    const sig = createHmac('sha256', secret).update(`${t}.${body}`).digest('hex');
    const r = await fetch(heraldBase + src.ingest_path, { method: 'POST', body,
      headers: { 'content-type': 'application/json', 'stripe-signature': `t=${t},v1=${sig}` } });
    return r.status;
  };
  assert.equal(await ingest('whsec_test_secret_for_e2e', 'evt_stripe_1'), 200);
  await waitFor('the forward to /fail is dead-lettered', async () =>
    (await api('GET', `/v1/endpoints/${src.endpoint_id}/deliveries?state=dead`)).body.data.length === 1);
  assert.ok(received.some((x) => x.path === '/fail/stripe' && x.body.includes('evt_stripe_1')), 'the destination got the event');
  await page.click(`[data-testid=sources] a[href="/ui/sources/${src.id}"]`);
  assert.match(await page.textContent('[data-testid=forwarding]'), /enabled[\s\S]*circuit breaker\s*closed/);
  assert.match(await page.textContent('[data-testid=source-dead]'), /HTTP 500/);
  assert.equal(await page.$$eval('[data-testid=source-dead] a[href^="/ui/deliveries/"]', (a) => a.length), 1);
  await shot(page, 'source');

  log('a paused (or, after a 410, disabled) forwarding endpoint shows in the sources list');
  await api('POST', `/v1/endpoints/${src.endpoint_id}/pause`);
  await page.goto(heraldBase + '/ui/sources');
  assert.match(await page.textContent(`[data-testid=sources] tr:has(a[href="/ui/sources/${src.id}"]) [data-testid=forwarding-state]`), /paused: new forwards are held/);
  await shot(page, 'sources');
  await api('POST', `/v1/endpoints/${src.endpoint_id}/resume`);
  await page.click(`[data-testid=sources] a[href="/ui/sources/${src.id}"]`);

  log('replace the source\'s secrets: the old one no longer verifies, a new one does');
  await page.fill('textarea[name=secrets]', 'whsec_rotated_one\nwhsec_rotated_two');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('.flash'), /saved/);
  assert.match(await page.textContent('main'), /2 secret\(s\)/);
  assert.equal((await api('GET', `/v1/sources/${src.id}`)).body.secrets, 2);
  assert.equal(await ingest('whsec_test_secret_for_e2e', 'evt_stripe_2'), 401, 'the replaced secret is refused');
  assert.equal(await ingest('whsec_rotated_two', 'evt_stripe_3'), 200, 'a new secret verifies');

  log('the source\'s settings from its form: a refused value keeps what was typed, then it saves');
  await page.fill('input[name=dedupe]', 'bogus-rule');
  await page.fill('input[name=tolerance_seconds]', '600');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('.error');
  assert.match(await page.textContent('.error'), /Dedupe/);
  assert.equal(await page.inputValue('input[name=dedupe]'), 'bogus-rule', 'the refused form lost the typed dedupe rule');
  assert.equal(await page.inputValue('input[name=tolerance_seconds]'), '600', 'the refused form lost the typed tolerance');
  assert.equal((await api('GET', `/v1/sources/${src.id}`)).body.tolerance_seconds, 300, 'a refused form changed the source');
  await shot(page, 'source-refused');
  await page.fill('input[name=dedupe]', 'json:/id');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('.flash');
  const edited = (await api('GET', `/v1/sources/${src.id}`)).body;
  assert.deepEqual([edited.tolerance_seconds, edited.dedupe, edited.secrets], [600, 'json:/id', 2]);
  assert.match(await page.textContent('main'), /tolerance 600 s · dedupe json:\/id · body cap 1 MiB/);

  log('a save that changes nothing says so, not "saved"');
  await page.click('button:has-text("Save")');
  await page.waitForSelector('.flash');
  assert.match(await page.textContent('.flash'), /nothing changed/);
  assert.equal((await api('GET', `/v1/sources/${src.id}`)).body.updated_at, edited.updated_at, 'a save without changes wrote the source');

  log('delete a source from its page, after a confirmation page');
  const gone = (await api('POST', '/v1/sources', { name: 'retired', scheme: 'github', secrets: ['gh_secret_for_e2e_0123'], destination_url: `${R}/retired` })).body;
  await page.goto(heraldBase + `/ui/sources/${gone.id}`);

  log('a github source: deduped on its body (its form offers no header: rule); a 410 disables its forwarding, Enable on its page');
  assert.match(await page.textContent('main'), /dedupe the SHA-256 of the body · body cap 1 MiB/);
  assert.doesNotMatch(await page.textContent('main'), /the scheme's event id|header:<Name>/);
  const ghBody = JSON.stringify({ zen: 'Keep it logically awesome.', hook_id: 1 });
  const ghSig = 'sha256=' + createHmac('sha256', 'gh_secret_for_e2e_0123').update(ghBody).digest('hex');
  assert.equal((await fetch(heraldBase + gone.ingest_path, { method: 'POST', body: ghBody,
    headers: { 'content-type': 'application/json', 'x-hub-signature-256': ghSig, 'x-github-event': 'ping', 'x-github-delivery': 'd-1' } })).status, 200);
  await waitFor('the 410 disables the forwarding endpoint', async () =>
    (await api('GET', `/v1/endpoints/${gone.endpoint_id}`)).body.state === 'disabled');
  await page.reload();
  assert.match(await page.textContent('[data-testid=forwarding]'), /disabled · \S/);
  assert.match(await page.textContent('[data-testid=forwarding-action]'), /Enable/);
  await shot(page, 'source-disabled');
  await page.click('[data-testid=forwarding-action] button:has-text("Enable")');
  await page.waitForURL(new RegExp(`/ui/sources/${gone.id}$`));
  assert.match(await page.textContent('.flash'), new RegExp(`Endpoint ${gone.endpoint_id} is enabled`));
  assert.equal((await api('GET', `/v1/endpoints/${gone.endpoint_id}`)).body.state, 'enabled');
  await page.click('a:has-text("Delete source…")');
  await page.waitForURL(new RegExp(`/ui/sources/${gone.id}/delete$`));
  assert.match(await page.textContent('main'), new RegExp(`Delete source retired\\?[\\s\\S]*${gone.endpoint_id}`));
  await shot(page, 'source-delete');
  await page.click('button:has-text("Delete source")');
  await page.waitForURL(/\/ui\/sources$/);
  assert.match(await page.textContent('.flash'), new RegExp(`Source ${gone.id} deleted`));
  assert.equal((await api('GET', `/v1/sources/${gone.id}`)).status, 404);
  assert.equal((await fetch(heraldBase + gone.ingest_path, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status, 404, 'the deleted source\'s ingest path');

  log('an hmac source: its page shows how the provider signs (header, algorithm, encoding, prefix, timestamp, signed content), never its secret');
  const hmacSecret = 'acme_hmac_secret_for_e2e_0123';
  const hm = (await api('POST', '/v1/sources', { name: 'acme-billing', scheme: 'hmac', secrets: [hmacSecret], destination_url: `${R}/ok/acme`,
    hmac: { header: 'X-Acme-Signature', algorithm: 'sha512', encoding: 'base64', prefix: 'v1=', timestamp_header: 'X-Acme-Timestamp', template: '{timestamp}.{body}' } })).body;
  {
    const body = JSON.stringify({ id: 'inv_1', type: 'invoice.paid' });
    const t = Math.floor(Date.now() / 1000);
    const sig = 'v1=' + createHmac('sha512', hmacSecret).update(`${t}.${body}`).digest('base64');
    assert.equal((await fetch(heraldBase + hm.ingest_path, { method: 'POST', body,
      headers: { 'content-type': 'application/json', 'x-acme-signature': sig, 'x-acme-timestamp': String(t) } })).status, 200, 'a request signed as configured verifies');
    await waitFor('the hmac source forwards', async () => received.some((x) => x.path === '/ok/acme'));
  }
  await page.goto(heraldBase + `/ui/sources/${hm.id}`);
  const hmacSettings = await page.textContent('[data-testid=hmac-settings]');
  // Values between quotes, every space kept (code.exact: white-space pre-wrap).
  for (const re of [/Signature header\s*"X-Acme-Signature"/, /Algorithm\s*HMAC-SHA512/, /Encoding\s*base64/, /Prefix\s*"v1="/,
    /Timestamp header\s*"X-Acme-Timestamp"[\s\S]*tolerance 300 s/, /Signed content\s*"\{timestamp\}\.\{body\}"/]) {
    assert.match(hmacSettings, re);
  }
  assert.doesNotMatch(await page.content(), new RegExp(hmacSecret), 'the page shows the hmac secret');
  await shot(page, 'source-hmac');

  log("the hmac source's forwarding endpoint: its delete page leads to the source's, and offers no form");
  await page.goto(heraldBase + `/ui/endpoints/${hm.endpoint_id}/delete`);
  assert.match(await page.textContent('[data-testid=source-owned]'), /is deleted with its source/);
  assert.equal(await page.getAttribute('[data-testid=source-owned] a:has-text("delete source")', 'href'), `/ui/sources/${hm.id}/delete`);
  assert.equal(await page.locator('[data-testid=confirm-delete]').count(), 0, 'the forwarding endpoint still has a delete form');
  await shot(page, 'endpoint-forwarding-delete');
  log("the hmac source's forwarding endpoint: its edit page leads to the source's page, and offers no form");
  await page.goto(heraldBase + `/ui/endpoints/${hm.endpoint_id}/edit`);
  assert.match(await page.textContent('[data-testid=source-owned]'), /is changed through its source/);
  assert.equal(await page.getAttribute('[data-testid=source-owned] a:has-text("the source\'s page")', 'href'), `/ui/sources/${hm.id}`);
  assert.equal(await page.locator('#endpoint-form').count(), 0, 'the forwarding endpoint still has an edit form');
  await shot(page, 'endpoint-forwarding-edit');

  log('a description with a bidirectional override (U+202E) reorders nothing: not the text around it, not itself');
  {
    const bidi = (await api('POST', '/v1/endpoints', { tenant: 'acme', url: `${R}/ok/bidi`, description: 'billing \u202eevil text' })).body;
    await page.goto(heraldBase + `/ui/endpoints?tenant=acme&q=${bidi.id}`);
    const row = `tr[data-endpoint="${bidi.id}"]`;
    // Where each piece of the row's text is drawn: a Range over its
    // characters in the first text node holding it.
    const where = (needle) => page.$eval(row, (tr, needle) => {
      const walk = document.createTreeWalker(tr, NodeFilter.SHOW_TEXT);
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const at = n.data.indexOf(needle);
        if (at < 0) continue;
        const r = document.createRange();
        r.setStart(n, at);
        r.setEnd(n, at + needle.length);
        const b = r.getBoundingClientRect();
        return { left: b.left, right: b.right, top: b.top };
      }
      return null;
    }, needle);
    const [id, billing, evil, text, tenant] = [await where(bidi.id), await where('billing'), await where('evil'), await where('text'), await where('acme')];
    assert.ok(id && billing && evil && text && tenant, 'a piece of the row is not shown');
    assert.ok(id.right <= billing.left && billing.right <= evil.left && evil.right <= text.left,
      `the sub line does not read as stored (id ${id.left}, billing ${billing.left}, evil ${evil.left}, text ${text.left})`);
    assert.ok(text.right <= tenant.left, 'the tenant cell moved');
    assert.equal((await page.textContent(`${row} td.tenant`)).trim(), 'acme');
    assert.match(await page.textContent(`${row} .sub`), /^ep_\S+ · billing <U\+202E>evil text$/, 'the override is not shown by its code point');
    await shot(page, 'endpoints-bidi', false);
    await page.goto(heraldBase + `/ui/endpoints/${bidi.id}`);
    assert.equal((await page.textContent('[data-testid=description]')).trim(), 'billing <U+202E>evil text');
    // An emoji's zero-width joiner (U+200D, a format character too) is kept as it is.
    assert.equal((await api('PATCH', `/v1/endpoints/${bidi.id}`, { description: 'team \u{1F469}\u200d\u{1F4BB}' })).status, 200);
    await page.reload();
    assert.equal((await page.textContent('[data-testid=description]')).trim(), 'team \u{1F469}\u200d\u{1F4BB}');
    assert.equal((await api('DELETE', `/v1/endpoints/${bidi.id}`)).status, 204);
  }

  log('API keys: create one (shown once), create a portal link for acme');
  await page.goto(heraldBase + '/ui/keys');
  await page.fill('.form input[name=name]', 'billing publisher');
  await page.selectOption('.form select[name=role]', 'publisher');
  await page.fill('.form input[name=tenant]', 'acme');
  await page.click('button:has-text("Create key")');
  assert.match(await page.textContent('[data-testid=new-key]'), /^herald_key_/);
  const publisherKey = (await page.textContent('[data-testid=new-key]')).trim();
  const nKeys = (await api('GET', '/v1/api-keys')).body.data.length;
  await page.reload();
  assert.equal(await page.$('[data-testid=new-key]'), null, 'a reload shows the new key again');
  assert.equal((await api('GET', '/v1/api-keys')).body.data.length, nKeys, 'a reload created another key');
  await page.fill('#portal-form input[name=tenant]', 'acme');
  await page.selectOption('#portal-form select[name=role]', 'manager');
  await page.click('button:has-text("Create portal link")');
  const portalURL = (await page.textContent('[data-testid=portal-url]')).trim();
  assert.ok(portalURL.startsWith(heraldBase + '/ui/portal#token=herald_portal_'), portalURL);
  await shot(page, 'keys');

  log('a publisher key lands on the events page; the nav offers only what it may read');
  const blocked3 = [];
  const ctx3 = await newContext(browser, blocked3);
  const pubPage = await ctx3.newPage();
  await pubPage.goto(heraldBase + '/ui/sign-in');
  await pubPage.fill('#key', publisherKey);
  await pubPage.click('#signin button[type=submit]');
  await pubPage.waitForURL(heraldBase + '/ui/events');
  const pubNav = await pubPage.$$eval('nav a', (as) => as.map((a) => a.textContent.trim()));
  assert.deepEqual(pubNav, ['Events', 'Event catalog', 'API reference'], 'publisher nav: ' + pubNav);
  for (const href of await pubPage.$$eval('nav a[href^="/ui/"]', (as) => as.map((a) => a.getAttribute('href')))) {
    assert.equal((await pubPage.goto(heraldBase + href)).status(), 200, 'nav entry ' + href);
  }
  await pubPage.goto(heraldBase + '/ui/events');
  await pubPage.fill('#event-search input[name=id]', 'ord-1001');
  await pubPage.click('#event-search button[type=submit]');
  await pubPage.click('[data-testid=events] >> text=ord-1001');
  await pubPage.waitForSelector('[data-testid=payload]');
  await pubPage.goto(heraldBase + '/ui/events');
  await shot(pubPage, 'publisher');
  await pubPage.click('a.brand');
  assert.equal(pubPage.url(), heraldBase + '/ui/events', 'the brand link leads a publisher to its own first page');
  await ctx3.close();
  assert.deepEqual(blocked3, []);

  log('a portal link without its token says so');
  {
    const ctx0 = await browser.newContext();
    const p0 = await ctx0.newPage();
    await p0.goto(heraldBase + '/ui/portal');
    assert.match(await p0.textContent('[data-testid=portal-no-token]'), /has no token/);
    assert.equal((await p0.textContent('h1')).trim(), 'Sign in');
    await ctx0.close();
  }
  log('open the portal link in a fresh context: only acme');
  const blocked2 = [];
  const ctx2 = await newContext(browser, blocked2);
  const portal = await ctx2.newPage();
  await portal.goto(portalURL);
  await portal.waitForURL(heraldBase + '/ui/endpoints');
  assert.match(await portal.textContent('[data-testid=who]'), /manager · tenant acme · portal/);
  const listed = await portal.$$eval('[data-testid=endpoints] tr[data-endpoint]', (rows) => rows.map((r) => r.dataset.endpoint));
  assert.deepEqual(listed.sort(), [epOK, epFail, epFlaky].sort());
  assert.ok(!(await portal.textContent('main')).includes('globex'));
  assert.equal(await portal.$('nav >> text=API keys'), null, 'no API keys page for a tenant');
  await shot(portal, 'portal');
  const refused = await portal.goto(`${heraldBase}/ui/deliveries/${otherDelivery}`);
  assert.ok([403, 404].includes(refused.status()), 'another tenant\'s delivery is refused: ' + refused.status());
  assert.ok(!(await portal.textContent('main')).includes(epOther));
  const refused2 = await portal.goto(`${heraldBase}/ui/endpoints/${epOther}`);
  assert.ok([403, 404].includes(refused2.status()));
  const refused3 = await portal.goto(`${heraldBase}/ui/keys`);
  assert.equal(refused3.status(), 403, 'the keys page is refused to a tenant');
  await ctx2.close();
  assert.deepEqual(blocked2, []);

  log('revoke the publisher key from the API keys page: the confirmation first');
  {
    const row = '[data-testid=keys] tr:has-text("billing publisher")';
    await page.goto(heraldBase + '/ui/keys');
    const asked = [];
    page.once('dialog', (d) => { asked.push(d.message()); d.dismiss(); });
    await page.click(`${row} button:has-text("Revoke")`);
    assert.match(asked[0] || '', /Revoke billing publisher\?/, 'the page asks before revoking');
    assert.equal((await api('GET', '/v1/endpoints?limit=1', undefined, publisherKey)).status, 403, 'dismissed: the key still authenticates (and its role may not list endpoints)');
    page.once('dialog', (d) => d.accept());
    await page.click(`${row} button:has-text("Revoke")`);
    await page.waitForSelector('.flash');
    assert.match(await page.textContent('.flash'), /revoked/);
    assert.match(await page.textContent(row), /revoked \d{4}-/);
    assert.equal(await page.$(`${row} button:has-text("Revoke")`), null, 'a revoked key has no Revoke button');
    assert.equal((await api('GET', '/v1/events?limit=1', undefined, publisherKey)).status, 401, 'the revoked key is refused');
  }

  log('a forged cross-site POST without the CSRF token is refused');
  forgeTarget = `${heraldBase}/ui/endpoints/${epOK}/delete`;
  const forged = page.waitForResponse((r) => r.url() === forgeTarget);
  await page.goto(`${R}/forge`);
  assert.equal((await forged).status(), 403);
  const direct = await ctx.request.post(forgeTarget, { form: { x: '1' } });
  assert.equal(direct.status(), 403);
  const wrong = await ctx.request.post(forgeTarget, { form: { csrf: 'not-the-token' } });
  assert.equal(wrong.status(), 403);
  assert.equal((await api('GET', `/v1/endpoints/${epOK}`)).status, 200, 'the endpoint is still there');

  log('a long URL and description without spaces wrap: no page is wider than the window');
  {
    const long = (await api('POST', '/v1/endpoints', { tenant: 'acme', url: `${R}/ok/${'a'.repeat(1500)}`,
      description: 'd'.repeat(1000) })).body;
    for (const path of [`/ui/endpoints?tenant=acme&q=${long.id}`, `/ui/endpoints/${long.id}`, `/ui/endpoints/${long.id}/delete`]) {
      await page.goto(heraldBase + path);
      const [wide, view] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      assert.ok(wide <= view, `${path} is ${wide} px wide in a window of ${view} px`);
    }
    // A long tenant name beside a long URL keeps a readable column (it
    // used to be squeezed to one word a line, broken at each "-").
    const lt = (await api('POST', '/v1/endpoints', { tenant: 'north-west-regional-billing-team', url: `${R}/ok/lt` })).body;
    await page.goto(heraldBase + '/ui/endpoints');
    const tenantCell = await page.$eval(`tr[data-endpoint="${lt.id}"] td.tenant`, (td) => td.getBoundingClientRect().width);
    const longCell = await page.$eval(`tr[data-endpoint="${long.id}"] td.tenant`, (td) => td.getBoundingClientRect().width);
    assert.ok(tenantCell >= 140 && longCell === tenantCell, `the tenant column is ${tenantCell} px wide beside a long URL`);
    assert.equal((await api('DELETE', `/v1/endpoints/${long.id}`)).status, 204);
    assert.equal((await api('DELETE', `/v1/endpoints/${lt.id}`)).status, 204);
  }

  log('a phone-sized window (390 px): no page is wider than the window; a wide table scrolls within itself');
  {
    const failDead = (await api('GET', `/v1/endpoints/${epFail}/deliveries?state=dead`)).body.data[0];
    await page.setViewportSize({ width: 390, height: 844 });
    const narrow = ['/ui/', '/ui/endpoints', `/ui/endpoints/${epFail}`, `/ui/endpoints/${epFail}/edit`, '/ui/endpoints/new',
      `/ui/deliveries/${failDead.id}`, '/ui/events', '/ui/events/ord-1001?tenant=acme', '/ui/dead-letters',
      '/ui/catalog', '/ui/catalog/shipment.sent', '/ui/sources', `/ui/sources/${src.id}`, `/ui/sources/${hm.id}`, '/ui/keys', '/docs'];
    for (const path of narrow) {
      await page.goto(heraldBase + path);
      const [wide, view] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
      assert.ok(wide <= view, `${path} is ${wide} px wide in a window of ${view} px`);
    }
    // The endpoints list is wider than the window: it scrolls, its
    // columns keep a readable width.
    await page.goto(heraldBase + '/ui/endpoints');
    const [tw, tv, col] = await page.$eval('[data-testid=endpoints]', (t) => [t.scrollWidth, t.clientWidth, t.querySelector('tr[data-endpoint] td').getBoundingClientRect().width]);
    assert.ok(tw > tv && col >= 150, `the endpoints table: ${tw} px of content in ${tv} px, first column ${col} px`);
    await shot(page, 'endpoints-narrow', false);
    const ctxN = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const pN = await ctxN.newPage();
    await pN.goto(heraldBase + '/ui/sign-in');
    const [w2, v2] = await pN.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
    assert.ok(w2 <= v2, `the sign-in page is ${w2} px wide in a window of ${v2} px`);
    await ctxN.close();
    await page.setViewportSize({ width: 1280, height: 900 });
  }

  log('API reference at /docs, offline');
  await page.goto(heraldBase + '/docs');
  assert.match(await page.textContent('main'), /\/v1\/endpoints/);
  await shot(page, 'docs', false); // the first screen: the whole reference is very long

  log('sign out');
  await page.goto(heraldBase + '/ui/endpoints');
  await page.click('text=Sign out');
  await page.waitForURL(/\/ui\/sign-in/);
  await page.goto(heraldBase + '/ui/endpoints');
  assert.match(page.url(), /\/ui\/sign-in/, 'signed out: back to sign-in');

  log('repeated wrong keys: the sign-in answers 429 "too many attempts, retry in N s"');
  const blocked4 = [];
  const ctx4 = await newContext(browser, blocked4);
  const thr = await ctx4.newPage();
  // Wrong keys sent to the API from this address in a loop keep its bucket
  // empty (the console's sign-in and the API share one throttle), so
  // the page's sign-in below meets it whatever the machine's speed.
  let draining = true;
  const bad = { headers: { authorization: 'Bearer herald_key_guessed' } };
  const drainer = (async () => { while (draining) await fetch(heraldBase + '/v1/endpoints', bad); })();
  await waitFor('the API throttles this address', async () => (await fetch(heraldBase + '/v1/endpoints', bad)).status === 429);
  let last;
  await thr.goto(heraldBase + '/ui/sign-in');
  for (let i = 0; i < 5; i++) { // the refused page is a sign-in form again
    await thr.fill('#key', 'herald_key_guess_' + i);
    const resp = thr.waitForResponse((r) => r.url() === heraldBase + '/ui/sign-in' && r.request().method() === 'POST');
    await thr.click('#signin button[type=submit]');
    last = await resp;
    if (last.status() === 429) break;
    assert.equal(last.status(), 401); // a token came back at that instant: try again
  }
  draining = false;
  await drainer;
  assert.equal(last.status(), 429, 'throttled sign-in');
  const wait = Number(last.headers()['retry-after']);
  assert.ok(wait >= 1, 'Retry-After ' + last.headers()['retry-after']);
  assert.match(await thr.textContent('.error'), new RegExp(`too many attempts, retry in ${wait} s`));
  await shot(thr, 'sign-in-throttled', false);
  await ctx4.close();
  assert.deepEqual(blocked4, []);

  assert.deepEqual(blocked, [], 'no request left loopback');
  assert.deepEqual(pageErrors.filter((e) => !/^Failed to load resource: the server responded with a status of (401|403|404|422|429)/.test(e)), [], 'no script or CSP error in the pages');
  console.log('PASS: console browser tests');
}

main().then(() => 0, (e) => {
  console.error(`FAIL at "${step}":`, e);
  return 1;
}).then(async (code) => {
  try { await browser?.close(); } catch {}
  herald?.kill('SIGTERM');
  receiver.close();
  rmSync(work, { recursive: true, force: true });
  process.exit(code);
});
