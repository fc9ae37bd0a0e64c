#!/usr/bin/env python3
"""Writes the JAX reference corpus: programs run in JAX on fixed inputs, inputs and outputs as .npy.

Each corpus module (tests/jax_reference/corpus_<family>.py) defines `build(add)`, and calls
    add(name, fn, *inputs)
for each case: `fn` is a JAX function of the inputs (NumPy arrays), returning an array or a
tuple/list of arrays, written as a JAX user writes it (eager jnp, or jax.jit/vmap/grad/pmap/
shard_map inside fn). The driver runs it with jax_enable_x64 on (spmd has float64 and int64 as
first-class dtypes, as JAX with x64 does; where only x64's 64-bit *defaults* differ, the C++
side names the case a deviation) and 8 CPU devices, and writes, under
tests/jax_reference/data/<family>/,
    <name>.in<k>.npy   the k-th input, exactly as the program saw it
    <name>.out<k>.npy  the k-th output
A bfloat16 array (NumPy has no bfloat16) is written as float32, which holds it exactly, to
<name>.in<k>.bf16.npy / <name>.out<k>.bf16.npy; the C++ test converts it back.

The C++ test (tests/jax_reference/reference_test.cpp with cases_<family>.cpp) runs the same
programs in spmd and compares; it reads only these files, so the test suite never needs JAX.

Usage (scripts/regen-jax-reference.sh runs it in the venv of scripts/install-bench-deps.sh):
    generate.py [family...]     regenerate the named families (default: all), then report each
                                output whose values changed, and cases added or removed.
"""
import importlib
import os
import pathlib
import re
import shutil
import sys
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data"
NAME = re.compile(r"^[a-z0-9_]+$")


def families():
    return sorted(p.stem[len("corpus_"):] for p in HERE.glob("corpus_*.py"))


def to_numpy(x):
    """A JAX or NumPy array as NumPy, with its file suffix (bf16 is stored as float32)."""
    a = np.asarray(x)
    if a.dtype.name == "bfloat16":
        return a.astype(np.float32), ".bf16.npy"
    if a.dtype.kind not in "biufc":
        raise TypeError(f"cannot store dtype {a.dtype}")
    # np.array, not np.ascontiguousarray: that one turns a 0-d array into shape (1,).
    return np.array(a, order="C"), ".npy"


def outputs_of(result):
    if isinstance(result, (tuple, list)):
        flat = []
        for r in result:
            flat.extend(outputs_of(r))
        return flat
    return [result]


def write_family(family, out_dir):
    """Runs family's cases and writes their files into out_dir; returns the number of outputs."""
    module = importlib.import_module(f"corpus_{family}")
    seen, count = set(), 0

    def add(name, fn, *inputs):
        nonlocal count
        if not NAME.match(name) or name in seen:
            raise ValueError(f"{family}: bad or repeated case name {name!r}")
        seen.add(name)
        try:
            outs = outputs_of(fn(*inputs))
        except Exception as e:  # name the case, then stop: a corpus that fails is a bug
            raise RuntimeError(f"{family}.{name}: {type(e).__name__}: {e}") from e
        for kind, arrays in (("in", inputs), ("out", outs)):
            for k, a in enumerate(arrays):
                data, suffix = to_numpy(a)
                np.save(out_dir / f"{name}.{kind}{k}{suffix}", data, allow_pickle=False)
        count += len(outs)

    module.build(add)
    return count


def same(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)


def main():
    sys.path.insert(0, str(HERE))
    wanted = sys.argv[1:] or families()
    unknown = set(wanted) - set(families())
    if unknown:
        sys.exit(f"unknown families {sorted(unknown)}; known: {families()}")
    total, changed = 0, []
    for family in wanted:
        with tempfile.TemporaryDirectory() as tmp:
            new_dir = pathlib.Path(tmp) / family
            new_dir.mkdir()
            n = write_family(family, new_dir)
            total += n
            old_dir = DATA / family
            old = {p.name for p in old_dir.glob("*.npy")} if old_dir.exists() else set()
            new = {p.name for p in new_dir.glob("*.npy")}
            for f in sorted(new - old):
                changed.append(f"added    {family}/{f}")
            for f in sorted(old - new):
                changed.append(f"removed  {family}/{f}")
            for f in sorted(old & new):
                if not same(old_dir / f, new_dir / f):
                    changed.append(f"changed  {family}/{f}")
            if old_dir.exists():
                shutil.rmtree(old_dir)
            shutil.copytree(new_dir, old_dir)
            print(f"{family}: {n} outputs")
    size = sum(p.stat().st_size for p in DATA.rglob("*.npy"))
    print(f"jax {jax.__version__}, numpy {np.__version__}: {total} outputs in {len(wanted)} "
          f"families; data/ holds {size / 1e6:.2f} MB")
    if changed:
        print(f"{len(changed)} files differ from the committed ones:")
        print("\n".join("  " + c for c in changed))
    else:
        print("no output changed")


if __name__ == "__main__":
    main()
