// SPDX-License-Identifier: MIT
// tests/hosts/node.js - Node.js as a host (tests/host-contract.cmake's host-node: node runs this
// script): a runtime that runs libuv itself, its own copy whose uv_* names the library's
// references bind to where the executable exports them (nodesource's node), or the system's
// libuv.so.1, the library's own object (Debian's nodejs). It prints the fd numbers and counts it
// gets, which must be bare's: fs.openSync, a TCP server and its connections, child_process,
// fs.watch, dns.lookup (the threadpool), a worker thread's openSync.
//
// libuv's global signal lock is a pipe that the first loop makes: the library's loop, before
// Node's, where the two share libuv (docs/architecture.md, the host contract), so Node's own loop
// makes two fds fewer than bare. Numbers are printed as offsets from the first openSync's and
// counts (of /proc/self/fd) as differences from the count then; the first number only as whether
// it is in the host's range (below 256): every fd of Node's was taken as the library's, moved high
// (788 where bare gives 18), before libuv's code was the library's only where the library runs it.
'use strict';
const fs = require('fs');
const net = require('net');
const cp = require('child_process');
const dns = require('dns');
const { Worker } = require('worker_threads');

function count() {
  return fs.readdirSync('/proc/self/fd').length;
}

// listen mode: the session has started once HOST_GO exists
const go = process.env.HOST_GO;
for (let i = 0; go && i < 2000 && !fs.existsSync(go); i++) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
}

const base = fs.openSync('/dev/null', 'r');
fs.closeSync(base);
const base_count = count();
let high = 0; // numbers above the host's range (256 and up)
const rel = (fd) => {
  if (typeof fd !== 'number' || fd < 0) {
    return String(fd);
  }
  high += fd >= 256;
  return 'b+' + (fd - base);
};
const delta = () => count() - base_count;
console.log('first openSync in the host range:', base < 256);

const a = fs.openSync('/dev/null', 'r');
const b = fs.openSync('/dev/zero', 'r');
console.log('openSync', rel(a), rel(b), 'fds', delta());
fs.closeSync(a);

function step_server(next) {
  let accepted = null, connected = false, client;
  const srv = net.createServer((sock) => {
    accepted = sock;
    done();
  });
  function done() {
    if (accepted === null || !connected) {
      return;
    }
    console.log('connection: accepted', rel(accepted._handle.fd), 'client', rel(client._handle.fd),
      'fds', delta());
    accepted.destroy();
    client.destroy();
    srv.close(next);
  }
  srv.listen(0, '127.0.0.1', () => {
    console.log('server', rel(srv._handle.fd), 'fds', delta());
    client = net.connect(srv.address().port, '127.0.0.1', () => {
      connected = true;
      done();
    });
  });
}

function step_children(next) {
  const r = cp.spawnSync('/bin/sh', ['-c', 'exit 3']);
  console.log('spawnSync status', r.status, 'fds', delta());
  cp.execFile('/bin/sh', ['-c', 'exit 4'], (err) => {
    console.log('execFile code', err ? err.code : 0, 'openSync', rel(fs.openSync('/dev/null', 'r')));
    next();
  });
}

function step_watch(next) {
  const w = fs.watch('/tmp', () => {});
  console.log('watch: openSync', rel(fs.openSync('/dev/null', 'r')), 'fds', delta());
  w.close();
  next();
}

function step_dns(next) {
  dns.lookup('localhost', (err) => {
    console.log('dns.lookup', err ? err.code : 'ok', 'openSync', rel(fs.openSync('/dev/null', 'r')));
    next();
  });
}

function step_worker(next) {
  const w = new Worker(
    "const fs = require('fs');" +
      "require('worker_threads').parentPort.postMessage(fs.openSync('/dev/null', 'r'));",
    { eval: true });
  let got = null;
  w.on('message', (m) => { got = m; });
  w.on('exit', (code) => {
    console.log('worker openSync', rel(got), 'exit', code);
    next();
  });
}

step_server(() => step_children(() => step_watch(() => step_dns(() => step_worker(() => {
  console.log('end: openSync', rel(fs.openSync('/dev/null', 'r')), 'fds', delta());
  console.log('numbers above the host range:', high);
})))));
