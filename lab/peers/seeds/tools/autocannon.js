'use strict';
// Runs autocannon v8 (this folder's node_modules) with the options NextRush's suite passes, given
// as one JSON argument ({url, connections, pipelining, duration, requests}), and prints the result
// object as JSON. `--version` prints autocannon's version.

const autocannon = require('autocannon');

if (process.argv[2] === '--version') {
  console.log(`autocannon ${require('autocannon/package.json').version}`);
  process.exit(0);
}
let opts;
try {
  opts = JSON.parse(process.argv[2] || '');
} catch (e) {
  console.error(`usage: node autocannon.js '{"url": ..., "connections": ...}': ${e.message}`);
  process.exit(2);
}
autocannon(opts, (err, result) => {
  if (err) {
    console.error(String(err));
    process.exit(1);
  }
  console.log(JSON.stringify(result));
});
