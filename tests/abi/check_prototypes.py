#!/usr/bin/env python3
"""Shows that the prototype check of the drop-in libraries is in force.

Each of libibverbs/libmlx5/libefa/librdmacm is compiled so that an exported
function defined with another prototype than rdma-core's headers give it, or
without any declaration in sight, is a compile error (docs/abi.md). This test
takes the exact compile command the build used for each library (from
compile_commands.json) and compiles three probes with it:
  - a definition with rdma-core's prototype: must compile;
  - the same function with a wrong prototype: must fail (conflicting C
    declaration);
  - an exported function no header declares: must fail
    (-Werror=missing-declarations).
Usage: check_prototypes.py <build dir> <source dir>
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

HEADERS = {
    "ibverbs": '#include "abi/ibverbs/exports.h"\n',
    "mlx5": "#include <infiniband/mlx5dv.h>\n",
    "efa": "#include <infiniband/efadv.h>\n",
    "rdmacm": "#include <rdma/rdma_cma.h>\n#include <rdma/rsocket.h>\n",
}
EXPORT = 'extern "C" __attribute__((visibility("default")))'
# library -> (right definition, wrong definition of the same symbol)
PROBES = {
    "ibverbs": ('const char* ibv_get_sysfs_path(void) { return "/sys"; }',
                "int ibv_get_sysfs_path(char*, size_t) { return 0; }"),
    "mlx5": ("int mlx5dv_query_device(ibv_context*, mlx5dv_context*) { return 0; }",
             "int mlx5dv_query_device(ibv_context*, void*) { return 0; }"),
    "efa": ("int efadv_query_device(ibv_context*, efadv_device_attr*, uint32_t) { return 0; }",
            "int efadv_query_device(ibv_context*, efadv_device_attr*) { return 0; }"),
    "rdmacm": ("ibv_context** rdma_get_devices(int*) { return nullptr; }",
               "int rdma_get_devices(int*) { return 0; }"),
}
UNDECLARED = "int softverbs_probe_undeclared(int x) { return x; }"


def compile_command(db, build_dir, lib):
    suffix = os.path.join("src", "abi", lib, "unsupported.cc")
    for entry in db:
        if entry["file"].endswith(suffix):
            return shlex.split(entry["command"]), entry.get("directory", build_dir)
    return None, None


def try_compile(cmd, directory, source_text, tmp):
    path = os.path.join(tmp, "probe.cc")
    with open(path, "w") as f:
        f.write(source_text)
    args = [a for a in cmd]
    # Replace "-o <obj> -c <src>" with a syntax-only compile of the probe.
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MT"):
            skip = True
            continue
        if a == "-MD":
            continue
        out.append(a)
    out += ["-fsyntax-only", path]
    r = subprocess.run(out, cwd=directory, capture_output=True, text=True, timeout=120)
    return r.returncode, r.stderr


def main():
    build_dir = sys.argv[1]
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        db = json.load(f)
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for lib, (right, wrong) in PROBES.items():
            cmd, directory = compile_command(db, build_dir, lib)
            if cmd is None:
                print(f"FAIL {lib}: no compile command for src/abi/{lib}/unsupported.cc")
                failures += 1
                continue
            if "-Werror=missing-declarations" not in cmd:
                print(f"FAIL {lib}: the library is not built with -Werror=missing-declarations")
                failures += 1
            head = HEADERS[lib]
            rc, err = try_compile(cmd, directory, f"{head}{EXPORT} {right}\n", tmp)
            if rc != 0:
                print(f"FAIL {lib}: rdma-core's prototype does not compile:\n{err}")
                failures += 1
            else:
                print(f"ok   {lib}: rdma-core's prototype compiles")
            rc, err = try_compile(cmd, directory, f"{head}{EXPORT} {wrong}\n", tmp)
            if rc == 0 or ("conflicting declaration" not in err and "ambiguating" not in err):
                print(f"FAIL {lib}: a wrong prototype was not rejected (rc {rc}):\n{err}")
                failures += 1
            else:
                print(f"ok   {lib}: a wrong prototype is a compile error")
            rc, err = try_compile(cmd, directory, f"{head}{EXPORT} {UNDECLARED}\n", tmp)
            if rc == 0 or "no previous declaration" not in err:
                print(f"FAIL {lib}: an undeclared export was not rejected (rc {rc}):\n{err}")
                failures += 1
            else:
                print(f"ok   {lib}: an undeclared export is a compile error")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
