// Save, when the job ends: every path must exist then, as actions/cache asks (it fails
// with "Path Validation Error" otherwise); an entry is never overwritten.
const { fs, paths, entry } = require("./common.cjs");

const where = entry();
if (process.env.STATE_hit === "true" || fs.existsSync(where)) {
  console.log(`cache double: ${where} is there already, not saved`);
  process.exit(0);
}
const missing = paths().filter((p) => !fs.existsSync(p));
if (missing.length) {
  console.log(`::error::Path Validation Error: Path(s) specified in the action for caching do(es) not exist, ` +
              `hence no cache is being saved: ${missing.join(", ")}`);
  process.exit(1);
}
paths().forEach((p, i) => fs.cpSync(p, `${where}/${i}`, { recursive: true }));
console.log(`cache double: saved ${paths().length} paths to ${where}`);
