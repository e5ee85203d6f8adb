"""The docs' result tables and plots, regenerated from docs/data/<experiment>/summary.json.

An experiment publishes its rows with lab/summaries.py's ``publish``. The
docs never hold a hand-typed figure for these experiments: ``python -m mlfc.lab.figures`` (``make
figures``) rewrites every block between ``<!-- figures:EXPERIMENT -->`` and ``<!-- /figures:EXPERIMENT
-->`` in docs/results.md and README.md from the summaries, draws docs/img/figures-EXPERIMENT.png, and
``--check`` fails when a block is not what the data says. Each experiment's table and plot live in its
package (mltcp/figures.py, hpsearch/figures.py, ...); this module only puts them in the docs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from mlfc.lab import bench_figures, sim_figures
from mlfc.lab.approx import figures as approx_figures
from mlfc.lab.chaos import figures as chaos_figures
from mlfc.lab.e2e import figures as e2e_figures
from mlfc.lab.hpsearch import figures as hpsearch_figures
from mlfc.lab.mltcp import figures as mltcp_figures
from mlfc.lab.mltcp import regime
from mlfc.lab.search import figures as search_figures
from mlfc.lab.summaries import DATA, ROOT, FiguresError, atomic_write, load

DOCS = (ROOT / "docs" / "results.md", ROOT / "README.md")
IMG = ROOT / "docs" / "img"

# the schemas stored with the experiments' summaries that carry one
SCHEMAS = {
    "mltcp": mltcp_figures.MLTCP_SCHEMA,
    "coordinated": e2e_figures.COORDINATED_SCHEMA,
    "transport-designs": bench_figures.TRANSPORT_DESIGNS_SCHEMA,
}


RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "chaos": chaos_figures.render_chaos,
    "mltcp": mltcp_figures.render_mltcp,
    regime.EXPERIMENT: regime.render,
    "coordinated": e2e_figures.render_coordinated,
    "bench": bench_figures.render_bench,
    "dataplane": bench_figures.render_dataplane,
    "dataplane-telemetry": bench_figures.render_dataplane_telemetry,
    "transport-designs": bench_figures.render_transport_designs,
    "hpsearch": hpsearch_figures.render_hpsearch,
    "approx": approx_figures.render_approx,
    "search": search_figures.render_search,
    "sim-scale": sim_figures.render_sim_scale,
}
PLOTS: dict[str, Callable[[Mapping[str, Any], Path], None]] = {
    "mltcp": mltcp_figures.plot_mltcp,
    regime.EXPERIMENT: regime.plot,
    "sim-scale": sim_figures.plot_sim_scale,
    "search": search_figures.plot_search,
}


def render(experiment: str, data: Path = DATA) -> str:
    if experiment not in RENDERERS:
        raise FiguresError(f"no table for experiment {experiment!r} (known: {', '.join(sorted(RENDERERS))})")
    summary = load(experiment, data)
    if not summary["rows"]:
        return f"*(no published rows yet: docs/data/{experiment}/summary.json)*"
    return RENDERERS[experiment](summary)


BLOCK = re.compile(r"(<!-- figures:([a-z0-9_-]+) -->\n)(.*?)(<!-- /figures:\2 -->)", re.S)


def fill(text: str, tables: Callable[[str], str]) -> str:
    """``text`` with every figures block's body replaced by ``tables(experiment)``."""
    return BLOCK.sub(lambda m: f"{m.group(1)}{tables(m.group(2))}\n{m.group(4)}", text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="fail if a docs block differs from its data; write nothing")
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--img", type=Path, default=IMG, help="where the plots go (%(default)s)")
    ap.add_argument("docs", nargs="*", type=Path, default=list(DOCS), help="files whose blocks to regenerate")
    args = ap.parse_args(argv)
    cache: dict[str, str] = {}

    def tables(experiment: str) -> str:
        if experiment not in cache:
            cache[experiment] = render(experiment, args.data)
        return cache[experiment]

    stale = []
    try:
        for doc in args.docs:
            old = doc.read_text()
            new = fill(old, tables)
            if new != old:
                stale.append(doc)
                if not args.check:
                    atomic_write(doc, new)
    except (FiguresError, OSError) as exc:
        print(f"figures: {exc}", file=sys.stderr)
        return 2
    if args.check:
        for doc in stale:
            print(f"figures: {doc} is not what docs/data says: run `make figures`", file=sys.stderr)
        return 1 if stale else 0
    for experiment in sorted(cache):
        if experiment in PLOTS:
            PLOTS[experiment](load(experiment, args.data), args.img / f"figures-{experiment}.png")
    print(f"figures: {len(cache)} experiment(s) in {len(args.docs)} file(s); rewritten: "
          f"{', '.join(str(d) for d in stale) or 'none'}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
