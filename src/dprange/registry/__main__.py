"""``python -m dprange.registry --docs``: print the generated docs page (docs/mechanisms.md);
without ``--docs``, list the registered names."""

from __future__ import annotations

import argparse

from . import REGISTRIES, docs_markdown


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dprange.registry", description=__doc__)
    parser.add_argument("--docs", action="store_true", help="print docs/mechanisms.md (Markdown)")
    args = parser.parse_args(argv)
    if args.docs:
        print(docs_markdown(), end="")
        return
    for registry in REGISTRIES:
        print(f"{registry.title}: {', '.join(registry.names())}")


if __name__ == "__main__":
    main()
