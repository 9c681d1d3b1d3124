"""SGLang's server flags read statically from its wheel's sources (importing SGLang needs torch, triton and CUDA).

Regenerate the list after moving the pinned version: `pip download --no-deps sglang==VERSION`, unzip the wheel,
then `python tests/recipes/extract_sglang_flags.py UNPACKED > tests/recipes/sglang-VERSION-flags.txt`.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _arg_flags(name: str, meta: ast.expr) -> list[str]:
    if isinstance(meta, ast.Constant) and isinstance(meta.value, str):
        return ["--" + name.replace("_", "-")]
    if not (isinstance(meta, ast.Call) and getattr(meta.func, "id", None) == "Arg"):
        return []
    keywords = {k.arg: k.value for k in meta.keywords}
    no_cli = keywords.get("no_cli")
    if isinstance(no_cli, ast.Constant) and no_cli.value is True:
        return []
    cli = keywords.get("cli_name")
    flags = [cli.value if isinstance(cli, ast.Constant) else "--" + name.replace("_", "-")]
    aliases = keywords.get("aliases")
    if isinstance(aliases, ast.List):
        flags += [e.value for e in aliases.elts if isinstance(e, ast.Constant)]
    return flags


def flags(root: Path) -> set[str]:
    found: set[str] = set()
    for path in sorted((root / "sglang/srt/arg_groups/fields").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                ann = node.annotation
                if isinstance(ann, ast.Subscript) and getattr(ann.value, "id", None) == "A":
                    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else []
                    if len(elts) >= 2:
                        found.update(_arg_flags(node.target.id, elts[1]))
    for path in [root / "sglang/srt/server_args.py", *sorted((root / "sglang/srt/arg_groups").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                found.update(a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-"))
    return found


if __name__ == "__main__":
    print("\n".join(sorted(flags(Path(sys.argv[1])))))
