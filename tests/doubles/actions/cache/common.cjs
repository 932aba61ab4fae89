// What restore.cjs and save.cjs share: the inputs as the runner hands them (INPUT_*).
const fs = require("fs");
const os = require("os");
const path = require("path");

function input(name) {
  return (process.env[`INPUT_${name.toUpperCase()}`] || "").trim();
}

function paths() {
  return input("path").split("\n").map((p) => p.trim()).filter(Boolean)
    .map((p) => (p.startsWith("~/") ? path.join(os.homedir(), p.slice(2)) : path.resolve(p)));
}

function entry() {
  const store = process.env.ACTION_DOUBLE_CACHE;
  if (!store) {
    console.log("::error::cache double: ACTION_DOUBLE_CACHE (the runner's cache folder) is not set");
    process.exit(1);
  }
  return path.join(store, input("key").replace(/[^A-Za-z0-9._-]/g, "_"));
}

module.exports = { fs, input, paths, entry };
