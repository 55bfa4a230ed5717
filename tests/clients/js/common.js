// What the kafkajs scripts share: a client for the broker under test, a bounded wait, the
// encoding of what a script saw for test_kafkajs.py (one JSON object, the last line of stdout;
// bytes as base64, null kept), and the script's entry point (its arguments: one JSON object).
'use strict'
// The default partitioner (murmur2, as Java's) is the one wanted; no warning about it.
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'
const { Kafka, logLevel } = require('kafkajs')

const TIMEOUT_MS = 60000 // generous: two shared cores

function kafka (bootstrap, clientId = 'tidemark-kafkajs') {
  return new Kafka({
    clientId,
    brokers: [bootstrap],
    connectionTimeout: 10000,
    requestTimeout: 30000,
    retry: { retries: 8, initialRetryTime: 100 },
    logLevel: logLevel.WARN,
    // stdout carries the result; kafkajs's own log goes to stderr (shown when a test fails).
    logCreator: () => ({ namespace, level, label, log }) => {
      const { message, ...rest } = log
      process.stderr.write(`kafkajs ${label} ${namespace}: ${message} ${JSON.stringify(rest)}\n`)
    }
  })
}

// Resolves once cond() holds, checking every 20 ms; rejects after timeoutMs.
async function until (cond, what, timeoutMs = TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise(resolve => setTimeout(resolve, 20))
  }
}

const b64 = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))

// A consumed message as test_kafkajs.py reads it; a header given more than once is a list.
function encodeMessage (topic, partition, m) {
  const headers = {}
  for (const [k, v] of Object.entries(m.headers || {})) headers[k] = Array.isArray(v) ? v.map(b64) : b64(v)
  return {
    topic,
    partition,
    offset: Number(m.offset),
    key: b64(m.key),
    value: b64(m.value),
    headers,
    timestamp: Number(m.timestamp),
    timestampType: m.batchContext ? m.batchContext.timestampType : null
  }
}

// An error as test_kafkajs.py checks it: its name and message, and every Kafka error type
// (UNKNOWN_TOPIC_OR_PARTITION, ...) found in it or in what it wraps (causes, the per-topic errors
// of an aggregate, the per-group and per-partition errors of DeleteGroups and DeleteRecords).
function encodeError (e) {
  const types = []
  const walk = (x, depth) => {
    if (!x || depth > 5) return
    if (x.type) types.push(x.type)
    for (const inner of x.errors || []) walk(inner, depth + 1)
    for (const g of x.groups || []) walk(g.error, depth + 1)
    for (const p of x.partitions || []) walk(p.error, depth + 1)
    if (x.cause && x.cause !== x) walk(x.cause, depth + 1)
  }
  walk(e, 0)
  return { name: e.name, message: e.message, types: [...new Set(types)] }
}

// Runs fn(args) and prints its result; any failure exits 1 with the error on stderr.
function main (fn) {
  const args = JSON.parse(process.argv[2] || '{}')
  const overall = setTimeout(() => {
    process.stderr.write(`${process.argv[1]}: over ${3 * TIMEOUT_MS} ms, giving up\n`)
    process.exit(2)
  }, 3 * TIMEOUT_MS)
  fn(args).then(result => {
    clearTimeout(overall)
    // Exit once the result is written: stdout to a pipe is asynchronous.
    process.stdout.write(JSON.stringify(result) + '\n', () => process.exit(0))
  }, e => {
    const text = `${process.argv[1]} failed: ${e && e.stack ? e.stack : e}\n${JSON.stringify(e)}\n`
    process.stderr.write(text, () => process.exit(1))
  })
}

module.exports = { kafka, until, b64, encodeMessage, encodeError, main, TIMEOUT_MS }
