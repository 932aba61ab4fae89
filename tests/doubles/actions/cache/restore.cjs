// Restore: each path from the key's entry, if there is one.
const { fs, paths, entry } = require("./common.cjs");

const where = entry();
const hit = fs.existsSync(where);
if (hit) {
  paths().forEach((p, i) => {
    const saved = `${where}/${i}`;
    if (fs.existsSync(saved)) fs.cpSync(saved, p, { recursive: true });
  });
}
console.log(`cache double: ${hit ? "restored from" : "no entry yet at"} ${where}`);
fs.appendFileSync(process.env.GITHUB_OUTPUT, `cache-hit=${hit}\n`);
fs.appendFileSync(process.env.GITHUB_STATE, `hit=${hit}\n`);
