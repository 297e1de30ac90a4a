'use strict';
// Prints the installed version of a package (for the lab's report), e.g. `node version.js hono`.
// Reads node_modules/<name>/package.json directly: several packages do not export it.
const fs = require('node:fs');
const path = require('node:path');

const name = process.argv[2];
if (!name) {
  console.error('usage: node version.js PACKAGE');
  process.exit(2);
}
const file = path.join(__dirname, 'node_modules', name, 'package.json');
console.log(`${name} ${JSON.parse(fs.readFileSync(file, 'utf8')).version} (node ${process.version})`);
