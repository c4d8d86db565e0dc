"""Device-correct code, checked on a CPU-only machine.

The first GPU run of mechrag failed in ``attention_features``: a one-hot map built with
``torch.zeros(...)`` on the CPU met CUDA attention patterns in an ``einsum``. Nothing on a CPU
can fail on that: every tensor lives on the one device there. So these tests read the code:

* every torch constructor (``torch.zeros``, ``tensor``, ``as_tensor``, ``arange``, ...) in the
  package names its ``device=``, or says ``# host`` (on its lines, or in a comment line just
  above) with why it belongs on the host (scores the case keeps, a CPU generator, a numpy
  round trip);
* every ``.numpy()`` of a tensor comes straight after ``.cpu()``, or says ``# host``.

The reverse also runs: the checker finds the original bug in a copy of the code that had it.
"""

from __future__ import annotations

import ast

from helpers import REPO

PACKAGE = REPO / "mechrag"
CONSTRUCTORS = {
    "arange", "as_tensor", "empty", "eye", "from_numpy", "full", "linspace", "logspace", "ones",
    "rand", "randint", "randn", "randperm", "scalar_tensor", "tensor", "zeros",
}  # fmt: skip
MARK = "# host"


def _marked(lines: list[str], node: ast.AST) -> bool:
    """``# host`` on one of the call's lines, or a comment line of its own just above it."""
    above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
    own = lines[node.lineno - 1 : node.end_lineno]
    return any(MARK in line for line in own) or (above.startswith("#") and MARK in above)


def unplaced_tensors(source: str, where: str) -> list[str]:
    """``where:line`` and the call, for each constructor or ``.numpy()`` that may leave a
    tensor on another device than the one it meets."""
    lines = source.splitlines()
    found = []
    nodes = sorted(ast.walk(ast.parse(source)), key=lambda n: getattr(n, "lineno", 0))
    for node in nodes:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        func = node.func
        constructor = (
            func.attr in CONSTRUCTORS
            and isinstance(func.value, ast.Name)
            and func.value.id == "torch"
            and not any(keyword.arg == "device" for keyword in node.keywords)
        )
        after_cpu = (
            isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Attribute)
            and func.value.func.attr == "cpu"
        )
        to_numpy = func.attr == "numpy" and not node.args and not after_cpu
        if (constructor or to_numpy) and not _marked(lines, node):
            found.append(f"{where}:{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_every_tensor_is_made_on_the_device_it_meets():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE.parent).as_posix()
        found += unplaced_tensors(path.read_text(encoding="utf-8"), where)
    assert not found, (
        "give these device= (the device of the tensors they meet), call .cpu() before .numpy(), "
        "or mark them '# host: why':\n" + "\n".join(found)
    )


BUGGY = '''
def attention_features(patterns, n_keys, n_sources, kept, owner):
    one_hot = torch.zeros(n_keys, n_sources, dtype=torch.float64)
    one_hot[torch.as_tensor(kept), torch.as_tensor(owner)] = 1.0
    return torch.einsum("lhtk,ks->lhst", patterns, one_hot).numpy()
'''


def test_the_checker_finds_the_bug_the_first_gpu_run_found():
    found = unplaced_tensors(BUGGY, "attention.py")
    lines = [line.split(": ")[0] for line in found]
    assert lines == ["attention.py:3", "attention.py:4", "attention.py:4", "attention.py:5"]
    fixed = BUGGY.replace("dtype=torch.float64)", "dtype=patterns.dtype, device=patterns.device)")
    fixed = fixed.replace("as_tensor(kept)", "as_tensor(kept, device=patterns.device)")
    fixed = fixed.replace("as_tensor(owner)", "as_tensor(owner, device=patterns.device)")
    fixed = fixed.replace(".numpy()", ".cpu().numpy()")
    assert unplaced_tensors(fixed, "attention.py") == []
    marked = BUGGY.replace("dtype=torch.float64)", "dtype=torch.float64)  # host: why")
    assert len(unplaced_tensors(marked, "attention.py")) == 3
