// Compile a wheel's Python modules to bytecode for Pyodide's own Python, in Node with the vendored Pyodide
// (build.py runs it when Node is there; see build.py's precompiled_wheel). Bytecode depends on the exact Python
// minor version, and Pyodide's (3.14) is not the one building the site, so Pyodide compiles it itself.
//
//   node tools/precompile.mjs <dist/pyodide/> <in.whl> <out.zip>
// out.zip holds one unchecked hash-based .pyc (PEP 552: valid without its source) per .py of the wheel, at the
// same path plus "c"; build.py assembles the page's wheel from it.
import { readFileSync, writeFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import path from "node:path";

const [, , pyodideDir, inWheel, outZip] = process.argv;
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: path.resolve(pyodideDir) + "/", stdout: () => {}, stderr: console.error });
py.FS.writeFile("/in.whl", readFileSync(inWheel));
py.runPython(`
import importlib.util
import zipfile
from importlib._bootstrap_external import _code_to_hash_pyc

with zipfile.ZipFile("/in.whl") as src, zipfile.ZipFile("/out.zip", "w", zipfile.ZIP_DEFLATED) as out:
    for name in sorted(src.namelist()):
        if name.endswith(".py"):
            data = src.read(name)
            code = compile(data, name, "exec", dont_inherit=True)
            info = zipfile.ZipInfo(name + "c", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, bytes(_code_to_hash_pyc(code, importlib.util.source_hash(data), False)))
`);
writeFileSync(outZip, py.FS.readFile("/out.zip"));
