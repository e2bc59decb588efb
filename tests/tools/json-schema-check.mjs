// SPDX-License-Identifier: MIT
// tests/tools/json-schema-check.mjs SCHEMA.json DOCUMENT.json - validates DOCUMENT against a
// JSON Schema (draft-07) with ajv; prints the errors and exits 1 when it does not conform.
// Run with NODE_PATH pointing at a node_modules that has ajv (tests install it, never commit it).
import { createRequire } from 'node:module'
import fs from 'node:fs'
import path from 'node:path'

const require = createRequire(path.join(process.env.NODE_PATH || process.cwd(), 'x.js'))
const Ajv = require('ajv')
const [schemaPath, docPath] = process.argv.slice(2)
if (!schemaPath || !docPath) {
  console.error('usage: json-schema-check.mjs SCHEMA.json DOCUMENT.json')
  process.exit(2)
}
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'))
const doc = JSON.parse(fs.readFileSync(docPath, 'utf8'))
const ajv = new (Ajv.default || Ajv)({ allErrors: true, strict: false })
const validate = ajv.compile(schema)
if (!validate(doc)) {
  console.error(JSON.stringify(validate.errors.slice(0, 10), null, 1))
  process.exit(1)
}
console.log(`${path.basename(docPath)} conforms to ${path.basename(schemaPath)}`)
