// The side-by-side peer of `herald bench inbound --peer`: the usual
// "receive fast, enqueue, answer 200" webhook receiver built from Express,
// BullMQ and Redis.
//
//   POST /in/github  verifies GitHub's signature (X-Hub-Signature-256:
//                    "sha256=" + hex HMAC-SHA256 of the raw body with the
//                    shared secret, the scheme Herald's "github" sources
//                    verify), enqueues the body and the GitHub headers as a
//                    BullMQ job whose deduplication id is X-GitHub-Delivery
//                    (a redelivery within PEER_DEDUPE_TTL_MS enqueues
//                    nothing), and answers 200 once Redis has the job.
//                    401 for a missing or wrong signature, 400 without a
//                    delivery id.
//   GET /healthz     200 once the queue's Redis connection is ready.
//
// A BullMQ worker forwards each job to
// PEER_FORWARD_URL (POST, the same body, signed with the same secret in
// X-Hub-Signature-256), with PEER_CONCURRENCY jobs in flight. A forward
// that fails (a network error, a timeout of PEER_FORWARD_TIMEOUT_MS, or
// any status other than 2xx) is retried with exponential backoff from
// PEER_BACKOFF_MS, PEER_ATTEMPTS attempts in all; a job whose last attempt
// failed is copied to the dead-letter queue "<queue>-dead" with its reason.
// The worker runs in a child process of its own (PEER_WORKER_PROCESS=1,
// the default: the receiver and the worker each get a core, as they would
// as two deployments) or in the receiver's process (0).
//
// Environment (defaults in brackets):
//   PEER_PORT [3000]  PEER_HOST [127.0.0.1]
//   PEER_SECRET (required)  PEER_FORWARD_URL (required)
//   PEER_REDIS_URL [redis://127.0.0.1:6379/0]
//   PEER_QUEUE [herald-peer-<pid>]: the queue's name; its keys (and the
//     dead-letter queue's) are deleted when the process ends on SIGTERM or
//     SIGINT, so runs on a shared Redis leave nothing behind
//   PEER_CONCURRENCY [64]  PEER_ATTEMPTS [8]  PEER_BACKOFF_MS [1000]
//   PEER_FORWARD_TIMEOUT_MS [10000]  PEER_DEDUPE_TTL_MS [3600000]
//   PEER_WORKER_PROCESS [1]
'use strict';

const crypto = require('node:crypto');
const { fork } = require('node:child_process');
const express = require('express');
const { Queue, Worker } = require('bullmq');
const ioredis = require('ioredis');

function env(name, def) {
  const v = process.env[name];
  if (v === undefined || v === '') {
    if (def === undefined) {
      console.error(`${name} is required`);
      process.exit(2);
    }
    return def;
  }
  return v;
}

function intEnv(name, def) {
  const v = Number(env(name, String(def)));
  if (!Number.isInteger(v) || v <= 0) {
    console.error(`${name} must be a positive integer, not ${process.env[name]}`);
    process.exit(2);
  }
  return v;
}

const port = intEnv('PEER_PORT', 3000);
const host = env('PEER_HOST', '127.0.0.1');
const secret = env('PEER_SECRET');
const forwardURL = env('PEER_FORWARD_URL');
const queueName = env('PEER_QUEUE', `herald-peer-${process.pid}`);
const concurrency = intEnv('PEER_CONCURRENCY', 64);
const attempts = intEnv('PEER_ATTEMPTS', 8);
const backoffMS = intEnv('PEER_BACKOFF_MS', 1000);
const forwardTimeoutMS = intEnv('PEER_FORWARD_TIMEOUT_MS', 10000);
const dedupeTTLMS = intEnv('PEER_DEDUPE_TTL_MS', 3600000);
const role = env('PEER_ROLE', 'receiver'); // "worker" in the forked worker process
const workerProcess = env('PEER_WORKER_PROCESS', '1') !== '0';

const redisURL = new URL(env('PEER_REDIS_URL', 'redis://127.0.0.1:6379/0'));
const connection = {
  host: redisURL.hostname,
  port: Number(redisURL.port || 6379),
  db: Number(redisURL.pathname.slice(1) || 0),
  password: redisURL.password || undefined,
  maxRetriesPerRequest: null,
};

const queue = new Queue(queueName, { connection });
const dead = new Queue(`${queueName}-dead`, { connection });

function sign(body) {
  return 'sha256=' + crypto.createHmac('sha256', secret).update(body).digest('hex');
}

function signatureValid(header, body) {
  if (typeof header !== 'string') return false;
  const want = Buffer.from(sign(body));
  const got = Buffer.from(header);
  return got.length === want.length && crypto.timingSafeEqual(got, want);
}

const app = express();
app.disable('x-powered-by');
app.disable('etag');

app.get('/healthz', (req, res) => res.status(200).send('ok'));

// The raw body, as signed: express.raw keeps it a Buffer.
app.post('/in/github', express.raw({ type: () => true, limit: '1mb' }), async (req, res) => {
  const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
  if (!signatureValid(req.get('X-Hub-Signature-256'), body)) {
    return res.status(401).json({ error: 'the X-Hub-Signature-256 signature does not match the body' });
  }
  const delivery = req.get('X-GitHub-Delivery');
  if (!delivery) {
    return res.status(400).json({ error: 'X-GitHub-Delivery is required (the deduplication id)' });
  }
  try {
    await queue.add(
      'forward',
      { body: body.toString('base64'), event: req.get('X-GitHub-Event') || '', delivery },
      {
        deduplication: { id: delivery, ttl: dedupeTTLMS },
        attempts,
        backoff: { type: 'exponential', delay: backoffMS },
        removeOnComplete: true,
        removeOnFail: true,
      },
    );
  } catch (err) {
    return res.status(503).json({ error: `enqueue failed: ${err.message}` });
  }
  res.status(200).json({ ok: true });
});

function startWorker() {
  const worker = new Worker(
    queueName,
    async (job) => {
      const body = Buffer.from(job.data.body, 'base64');
      const res = await fetch(forwardURL, {
        method: 'POST',
        body,
        headers: {
          'Content-Type': 'application/json',
          'X-GitHub-Event': job.data.event,
          'X-GitHub-Delivery': job.data.delivery,
          'X-Hub-Signature-256': sign(body),
        },
        signal: AbortSignal.timeout(forwardTimeoutMS),
      });
      await res.arrayBuffer();
      if (res.status < 200 || res.status > 299) {
        throw new Error(`forward answered ${res.status}`);
      }
    },
    { connection, concurrency },
  );

  // The dead-letter queue: a job whose last attempt failed.
  worker.on('failed', (job, err) => {
    if (job && job.attemptsMade >= (job.opts.attempts || 1)) {
      dead.add('dead', { ...job.data, reason: err ? err.message : '', attempts: job.attemptsMade }).catch((e) => {
        console.error(`dead-letter ${job.data.delivery}: ${e.message}`);
      });
    }
  });
  worker.on('error', (err) => console.error(`worker: ${err.message}`));
  return worker;
}

// deleteKeys removes every key of the queue and of its dead-letter queue.
async function deleteKeys() {
  const Redis = ioredis.Redis || ioredis.default || ioredis;
  const client = new Redis(connection);
  for (const name of [queueName, `${queueName}-dead`]) {
    let cursor = '0';
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `bull:${name}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await client.unlink(...keys);
    } while (cursor !== '0');
  }
  client.disconnect();
}

if (role === 'worker') {
  // The forked worker: it ends when its parent closes the IPC channel or
  // signals it; the parent deletes the keys.
  const worker = startWorker();
  const end = async () => {
    try {
      await worker.close(true);
      await Promise.all([queue.close(), dead.close()]);
    } finally {
      process.exit(0);
    }
  };
  process.on('disconnect', end);
  process.on('SIGTERM', end);
  process.on('SIGINT', end);
} else {
  startReceiver();
}

function startReceiver() {
  let worker;
  let child;
  if (workerProcess) {
    child = fork(__filename, [], { env: { ...process.env, PEER_ROLE: 'worker', PEER_QUEUE: queueName } });
    child.on('exit', (code, sig) => {
      if (!stopping) {
        console.error(`worker process exited (${code ?? sig})`);
        process.exit(1);
      }
    });
  } else {
    worker = startWorker();
  }

  let server;
  let stopping = false;
  async function stop() {
    if (stopping) return;
    stopping = true;
    if (server) server.close();
    try {
      if (worker) await worker.close(true);
      if (child && child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      await deleteKeys();
      await Promise.all([queue.close(), dead.close()]);
    } catch (err) {
      console.error(`shutdown: ${err.message}`);
    }
    process.exit(0);
  }
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);

  queue
    .waitUntilReady()
    .then(() => {
      server = app.listen(port, host, () => {
        const addr = server.address();
        console.log(`listening http://${addr.address}:${addr.port}`);
      });
      server.keepAliveTimeout = 65000;
    })
    .catch((err) => {
      console.error(`redis ${redisURL.host}: ${err.message}`);
      process.exit(1);
    });
}
