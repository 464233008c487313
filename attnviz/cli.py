"""The console script ``attnviz``.

    attnviz --version
    attnviz app [streamlit options…]      # e.g. attnviz app --server.port 8600
    attnviz app --model my-model.gguf     # your own GGUF in the model choice (repeatable)
    attnviz app --share-weights           # replicas on one machine share the decoders' weights
    attnviz atlas --corpus DIR_OR_FILE --model smollm2 --out atlas.npz [--ray ADDRESS|local]

``attnviz app`` runs the installed package's app (attnviz/app/main.py) with Streamlit, from
any folder. Streamlit reads its config file from the working folder (``.streamlit/``) or the
home folder, never from beside the script, so the app's own settings (the package's
``attnviz/app/config.toml``, the same as the checkout's ``.streamlit/config.toml``: no module
watcher, a minimal toolbar, no usage statistics, headless, the upload size) are given as
command-line options; options given after ``app`` come later and win.
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from pathlib import Path
from typing import NoReturn

from attnviz import __version__

APP = Path(__file__).resolve().parent / "app"
MAIN = APP / "main.py"
CONFIG = APP / "config.toml"


def config_options(config: Path = CONFIG) -> list[str]:
    """The config file's settings as Streamlit options: ``--server.fileWatcherType none`` …"""
    with open(config, "rb") as f:
        sections = tomllib.load(f)
    out = []
    for section, values in sections.items():
        for key, value in values.items():
            text = str(value).lower() if isinstance(value, bool) else str(value)
            out += [f"--{section}.{key}", text]
    return out


def streamlit_args(options: list[str]) -> list[str]:
    """Streamlit's command line for ``attnviz app`` followed by `options`."""
    return ["run", str(MAIN), *config_options(), *options]


def run_app(options: list[str]) -> NoReturn:
    """Become ``python -m streamlit run …/main.py`` (:func:`streamlit_args`): Streamlit's own
    command line, in this process (its id stays, so whatever stops ``attnviz app`` stops the
    server)."""
    command = [sys.executable, "-m", "streamlit", *streamlit_args(options)]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)


def main(argv: list[str] | None = None) -> int:
    from attnviz.models.catalogue import builtin   # the atlas's default model, by its name there

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(
        prog="attnviz", description="Every step of self-attention, interactive and exact.")
    parser.add_argument("--version", action="version", version=f"attnviz {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.add_parser("app", help="start the app (--model PATH.gguf, repeatable, adds your "
                                    "own GGUF to the model choice; --share-weights: the "
                                    "servers of this machine hold one copy of a decoder's "
                                    "weights; any further options go to Streamlit, e.g. "
                                    "--server.port 8600)", add_help=False)
    atlas = commands.add_parser(
        "atlas", help="the head atlas of a corpus: every head's metrics, top examples and "
                      "query/key maps, written to one .npz the Head atlas page opens")
    atlas.add_argument("--corpus", required=True,
                       help="a folder of .txt/.jsonl/.csv files, one such file, or a bundled "
                            "corpus by name (en, zh, all)")
    atlas.add_argument("--model", default=builtin.SMOLLM2,
                       help="a built-in decoder (smollm2, gemma3-270m) or a GGUF file's path")
    atlas.add_argument("--out", required=True, help="the atlas file to write (.npz)")
    atlas.add_argument("--ray", metavar="ADDRESS", default=None,
                       help="run on a Ray cluster (ray://host:10001, auto) or 'local' (a Ray "
                            "started here); without it, a pool of processes on this machine")
    atlas.add_argument("--workers", type=int, default=None,
                       help="worker processes (default: this machine's cores; with --ray, "
                            "the cluster's CPUs)")
    atlas.add_argument("--seed", type=int, default=0, help="the seed of every sample")
    args, rest = parser.parse_known_args(argv)
    if args.command == "atlas":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return run_atlas(args)
    if args.command != "app":
        parser.print_help()
        return 0 if not argv else 2
    models, rest = _models(rest)
    if "--share-weights" in rest:
        from attnviz.models import shared_weights

        rest = [option for option in rest if option != "--share-weights"]
        os.environ[shared_weights.ENV] = "1"
    if models:
        refused = check_models(models)
        if refused:
            print(refused, file=sys.stderr)
            return 2
        known = [p for p in os.environ.get("ATTNVIZ_MODELS", "").split(os.pathsep) if p]
        os.environ["ATTNVIZ_MODELS"] = os.pathsep.join(known + [str(m) for m in models])
    return run_app(rest)


def _models(options: list[str]) -> tuple[list[Path], list[str]]:
    """The --model PATH (or --model=PATH) options of ``attnviz app``, and the others (for
    Streamlit)."""
    models, rest, i = [], [], 0
    while i < len(options):
        option = options[i]
        if option == "--model" and i + 1 < len(options):
            models.append(Path(options[i + 1]).expanduser().resolve())
            i += 2
            continue
        if option.startswith("--model="):
            models.append(Path(option.split("=", 1)[1]).expanduser().resolve())
        else:
            rest.append(option)
        i += 1
    return models, rest


def run_atlas(args) -> int:
    """``attnviz atlas``: read the corpus, reduce it where asked, write the atlas file with
    every head's PCA map; say what was read, or why not."""
    from attnviz.core.errors import AttnvizInputError
    from attnviz.io.atlas_files import read_corpus, write_atlas
    from attnviz.models.readers import atlas_map, atlas_runners
    from attnviz.models.readers.atlas import Settings
    from attnviz.tutorials import atlas_corpus

    try:
        if args.corpus in atlas_corpus.NAMES and not Path(args.corpus).exists():
            texts = atlas_corpus.texts(args.corpus)
        else:
            texts = read_corpus(args.corpus)
        if not texts:
            raise AttnvizInputError("error.atlas.corpus_empty")
        settings = Settings(seed=args.seed)
        if args.ray:
            partial = atlas_runners.run_ray(args.model, texts, args.ray, args.workers,
                                            settings)
        else:
            partial = atlas_runners.run_pool(args.model, texts, args.workers or os.cpu_count()
                                             or 1, settings)
        write_atlas(args.out, partial, atlas_map.pca_all(partial))
    except AttnvizInputError as exc:
        print(f"attnviz atlas: {exc}", file=sys.stderr)
        return 2
    print(f"attnviz atlas: {partial.texts} texts, {partial.tokens} tokens of {partial.model} "
          f"-> {args.out}")
    return 0


def check_models(paths: list[Path]) -> str | None:
    """Why the server cannot offer these GGUF files (the first that fails: missing, unreadable,
    an architecture or tokenizer not read), in words; None when every one can be read. Only
    the person who starts the server chooses files: no page takes a path."""
    from attnviz.core.errors import AttnvizInputError
    from attnviz.models.decoders import gguf_llama

    for path in paths:
        try:
            if not path.is_file():
                raise AttnvizInputError("error.gguf.missing", path=str(path))
            gguf_llama.read_config(path)
        except AttnvizInputError as exc:
            return f"attnviz app --model {path}: {exc}"
    return None


if __name__ == "__main__":
    sys.exit(main())
