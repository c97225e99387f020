"""A release as one self-contained HTML page: the privacy statement in words, a summary, the
quantile table with its intervals, the CDF with its band and the histogram with error bars (a
1-D :class:`~dprange.answers.release.Release`), the heatmap of the cell counts (a 2-D
:class:`~dprange.answers.grid.GridRelease`), or for a
:class:`~dprange.answers.grouped.GroupedRelease` the groups' totals, their CDFs on one figure,
their histograms as small multiples and each group's quantile table.

The page needs nothing but a browser: the style is inline, the figures are inline base64 PNGs
(:mod:`dprange.answers.plot`), it has no script, and its Content-Security-Policy forbids any
fetch, so that it can be mailed or archived beside the release.  Every text that comes from
the user or the file (column names, units, titles, a saved statement) is HTML-escaped.  Like
the plots, the page is post-processing of the release: no privacy cost.
"""

from __future__ import annotations

import base64
import html
import io
from importlib import metadata

import numpy as np

from ..errors import DPRangeError
from . import plot, plot_style
from .describe import person_unit
from .grid import GridRelease
from .grouped import GroupedRelease

#: The quantile levels of the table (the deciles, as the command line prints them).
QUANTILE_LEVELS = tuple(float(q) for q in np.round(np.linspace(0.1, 0.9, 9), 10))

STYLE = """
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; color: #1a1a1a; max-width: 60rem;
       margin: 2rem auto; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccc; padding-bottom: 0.2rem; }
.subtitle { color: #555; margin-top: 0; }
.statement { background: #f3f7fb; border-left: 4px solid #1f4e79; padding: 0.6rem 1rem; }
.warning { background: #fff4e5; border-left: 4px solid #d55e00; padding: 0.6rem 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
th, td { padding: 0.25rem 0.8rem; border-bottom: 1px solid #e0e0e0; text-align: right; }
th { background: #f5f5f5; }
td.text, th.text { text-align: left; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption, .note { color: #555; font-size: 0.9rem; }
footer { margin-top: 3rem; color: #777; font-size: 0.85rem; }
"""

#: No fetch of any kind, no script: images from data: URLs and the inline style only.
CONTENT_SECURITY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"

NO_EXACT_ERRORS = (
    "No intervals: this release's errors are not known exactly (non-linear inference or data-dependent design)."
)

RELATIONS = {
    "add_remove": (
        "two data sets are neighbours when one is the other with one record added or removed",
        "the number of records is protected like everything else",
    ),
    "replace": (
        "two data sets are neighbours when one is the other with one record's value changed",
        "the number of records is public",
    ),
}


def e(text) -> str:
    """``text`` escaped for HTML text and attribute values."""
    return html.escape(str(text), quote=True)


def fmt(value: float) -> str:
    return f"{float(value):.6g}"


def software_version() -> str:
    try:
        return metadata.version("dprange")
    except metadata.PackageNotFoundError:
        return "unknown"


def _exact(release) -> bool:
    return bool(getattr(release, "exact_error_bars", True))


def is_grid(release) -> bool:
    """Whether ``release`` answers rectangles of a k-D grid: a GridRelease, or a data-aware grid
    release (dprange.data_aware.grid, a layer above this one: known by its rectangles)."""
    return isinstance(release, GridRelease) or (hasattr(release, "rectangle") and hasattr(release, "marginal"))


def _public_total(release):
    if isinstance(release, GridRelease):
        return release.measurements.total
    if is_grid(release):  # a data-aware grid release: the public total its provenance records
        return release.provenance.total
    return release.public_total


def domain_words(release) -> str:
    """The public domain in words: "[0, 100] in 100 equal bins" (per axis for a grid)."""
    domain = release.domain
    if domain is None:
        return " x ".join(f"{n} cells" for n in release.shape)
    parts = getattr(domain, "domains", None) or [domain]
    words = []
    for d in parts:
        if d.kind == "integers":
            words.append(f"the integers {fmt(d.lo)} to {fmt(d.hi)} (one bin each)")
        else:
            words.append(f"[{fmt(d.lo)}, {fmt(d.hi)}] in {d.bins} equal bins")
    return "; ".join(words)


def privacy_statement(release, column: str | None = None) -> list[str]:
    """The privacy guarantee in words, one paragraph per item: the guarantee (epsilon, delta),
    the unit and the neighbouring relation, what is public, the noise; the statement the release
    carries (``release.privacy_statement``) when it has one."""
    saved = getattr(release, "privacy_statement", None) or getattr(release, "statement", None)
    if isinstance(saved, str) and saved.strip():
        return [saved]
    if isinstance(saved, list | tuple) and saved:
        return [str(s) for s in saved]
    eps, delta = float(release.epsilon), float(release.delta or 0.0)
    guarantee = (
        f"This release satisfies ε-differential privacy with ε = {eps:g} (pure: δ = 0)."
        if delta == 0
        else f"This release satisfies (ε, δ)-differential privacy with ε = {eps:g} and δ = {delta:g}."
    )
    relation, count = RELATIONS.get(release.neighbours, (f"neighbours: {release.neighbours}", ""))
    unit = f"The unit of privacy is one record (one row of the input{f', its {column}' if column else ''}): {relation}."
    provenance = getattr(release, "provenance", None)
    person = getattr(provenance, "privacy_unit", None) or getattr(release, "privacy_unit", None)
    if person:  # a privacy unit: one person, all the rows sharing an id
        who, id_relation = person_unit(person)
        unit = f"The unit of privacy is {who}; neighbouring datasets: {id_relation}."
    public = [f"the domain: {domain_words(release)}", f"the mechanism ({release.mechanism}) and its parameters"]
    total = _public_total(release)
    if total is not None:
        public.append(f"the number of records ({fmt(total)})")
    what_public = (
        f"Public, not protected: {'; '.join(public)}. They must be chosen without looking at the data "
        "(dprange never reads them from it)" + (f"; {count}." if count else ".")
    )
    noise = str(getattr(release, "noise", None) or "")
    paragraphs = [guarantee, unit, what_public]
    if noise.startswith("local:"):  # dprange.ldp: each user randomised their own report
        paragraphs.append(
            f"Local privacy: every user randomised their own report ({noise[len('local:') :]} frequency oracle) "
            f"with ε = {eps:g} before sending it; the collector never saw a true value."
        )
    if getattr(getattr(release, "provenance", None), "data_dependent", False):
        paragraphs.append(
            "Part of the budget chose the design from the data (a data-aware mechanism): that choice is private "
            "and counted in ε, but the estimate's errors depend on the data, so no exact error bars are shown."
        )
    seeded = plot_style.seeded(release)
    if noise and not noise.startswith("local:") and not seeded:
        paragraphs.append(f"Noise: {noise.replace('_', ' ')}, drawn from a cryptographically secure source.")
    if seeded:
        paragraphs.append(
            "Warning: the noise was drawn from a seeded (predictable) generator: this release is for testing, "
            "not for publication."
        )
    return paragraphs


def figure_png(draw, release, **options) -> str:
    """The figure drawn by ``draw(release, buffer, **options)`` as a base64 PNG data URL."""
    buffer = io.BytesIO()
    draw(release, buffer, **options)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(draw, release, alt: str, caption: str, **options) -> str:
    """A <figure> with the inline image, or the reason it could not be drawn."""
    try:
        source = figure_png(draw, release, **options)
    except DPRangeError as exc:
        return f'<p class="warning">{e(alt)}: not drawn ({e(exc)})</p>'
    return (
        f'<figure><img src="{source}" alt="{e(alt)}" width="{int(plot_style.FIGSIZE[0] * 100)}">'
        f"<figcaption>{e(caption)}</figcaption></figure>"
    )


def _table(header: list[str] | None, rows: list[list[str]], text_columns: int = 1) -> str:
    """An HTML table of already-escaped cells (no header row when ``header`` is None); the first
    ``text_columns`` are left-aligned."""

    def cells(tag, values):
        return "".join(
            f'<{tag} class="text">{v}</{tag}>' if i < text_columns else f"<{tag}>{v}</{tag}>"
            for i, v in enumerate(values)
        )

    body = "".join(f"<tr>{cells('td', row)}</tr>" for row in rows)
    head = "" if header is None else f"<thead><tr>{cells('th', header)}</tr></thead>"
    return f"<table>{head}<tbody>{body}</tbody></table>"


def total_row(answer, public: bool, exact: bool, alpha: float) -> str:
    if public:
        return f"{fmt(answer.value)} (public)"
    if not exact:
        return f"{fmt(answer.value)} (no error bars)"
    low, high = answer.confidence_interval(alpha)
    level = f"{100 * (1 - alpha):g}%"
    return f"{fmt(answer.value)} ± {fmt(answer.stderr)} (1 s.e.); {level} interval [{fmt(low)}, {fmt(high)}]"


def quantile_section(release, alpha: float) -> str:
    """The deciles: the simultaneous interval first (what the release knows), then the point
    estimate; without exact error bars the points alone, said so."""
    try:
        answer = release.quantile(np.asarray(QUANTILE_LEVELS))
        values = np.atleast_1d(answer.value)
        exact = _exact(release)
        lower, upper = answer.confidence_interval(alpha, simultaneous=True) if exact else (None, None)
    except DPRangeError as exc:
        return f'<p class="warning">Quantiles unavailable: {e(exc)}</p>'
    level = f"{100 * (1 - alpha):g}%"
    if lower is None or upper is None:
        rows = [[f"{q:g}", "—", e(fmt(v))] for q, v in zip(QUANTILE_LEVELS, values)]
        note = (
            "No intervals: this release's errors are not known exactly (non-linear inference or data-dependent design)."
        )
    else:
        rows = [
            [f"{q:g}", e(f"[{fmt(lo)}, {fmt(hi)}]"), e(fmt(v))]
            for q, v, lo, hi in zip(QUANTILE_LEVELS, values, lower, upper)
        ]
        note = (
            f"The intervals hold for all nine levels at once with probability at least {level}; their ends are "
            "bin edges and hold whatever the values inside a bin."
        )
        if getattr(answer, "interpolated", False):
            note += " The point estimates interpolate inside their bin (they assume records spread evenly in it)."
    header = ["level", f"{level} simultaneous interval", "point estimate"]
    return _table(header, rows) + f'<p class="note">{e(note)}</p>'


def release_body(release, column, units, alpha: float, log_x: bool) -> list[str]:
    """The sections of a 1-D release's page after the privacy statement."""
    total = release.total()
    summary = [
        ["records", e(total_row(total, release.public_total is not None, _exact(release), alpha))],
        ["domain", e(domain_words(release))],
        ["mechanism", e(f"{release.mechanism} ({release.inference} inference)")],
    ]
    options = dict(alpha=alpha, column=column, units=units, log_x=log_x)
    label = plot_style.axis_label(column, units)
    band = (
        f"shaded: exact {100 * (1 - alpha):g}% pointwise confidence band"
        if _exact(release)
        else "no band: errors not known exactly"
    )
    bars = (
        f"error bars: exact {100 * (1 - alpha):g}% intervals per bin"
        if _exact(release)
        else "no error bars: errors not known exactly"
    )
    return [
        "<h2>Summary</h2>",
        _table(None, summary, text_columns=2),
        "<h2>Quantiles</h2>",
        quantile_section(release, alpha),
        "<h2>Cumulative distribution</h2>",
        _figure(
            plot.plot_cdf,
            release,
            f"Cumulative distribution of {label}",
            f"The estimated fraction of records at or below each value of {label}; {band}.",
            **options,
        ),
        "<h2>Histogram</h2>",
        _figure(
            plot.plot_histogram,
            release,
            f"Histogram of {label}",
            f"The estimated number of records in each bin of {label}; {bars}.",
            **options,
        ),
    ]


def grid_body(release: GridRelease, columns, alpha: float) -> list[str]:
    """The sections of a k-D grid release's page after the privacy statement."""
    box = release.rectangle([0] * len(release.shape), [n - 1 for n in release.shape])
    names = list(columns) if columns else [f"axis {i}" for i in range(len(release.shape))]
    summary = [
        ["records", e(total_row(box, _public_total(release) is not None, _exact(release), alpha))],
        ["columns", e(" × ".join(names))],
        ["cells", e(" × ".join(str(n) for n in release.shape))],
        ["domain", e(domain_words(release))],
        ["mechanism", e(release.mechanism)],
    ]
    body = ["<h2>Summary</h2>", _table(None, summary, text_columns=2)]
    if len(release.shape) == 2:
        labels = (names[0], names[1])
        body += [
            "<h2>Cell counts</h2>",
            _figure(
                plot.plot_heatmap,
                release,
                f"Heatmap of the estimated records by {labels[0]} and {labels[1]}",
                f"The estimated number of records in each cell of {labels[0]} by {labels[1]}; "
                + (
                    "every cell's standard error is in the release."
                    if _exact(release)
                    else "no error bars: errors not known exactly."
                ),
                labels=labels,
            ),
        ]
    else:
        body.append(f'<p class="note">A heatmap is drawn for 2-D releases; this one has {len(release.shape)} axes.</p>')
    return body


def shared_statement(grouped: GroupedRelease, column: str | None) -> list[str] | None:
    """The privacy statement every group's release shares, or None when they differ."""
    statements = [privacy_statement(r, column) for r in grouped.releases]
    return statements[0] if statements and all(st == statements[0] for st in statements) else None


def statement_block(paragraphs: list[str]) -> str:
    return '<div class="statement">' + "".join(f"<p>{e(p)}</p>" for p in paragraphs) + "</div>"


def grouped_statement(grouped: GroupedRelease, shared: list[str] | None) -> list[str]:
    """The privacy of a grouped release in words: what the groups spend together, how the keys
    were chosen, then the groups' ``shared`` statement (:func:`shared_statement`; when None
    each group's section carries its own, :func:`grouped_body`)."""
    delta = grouped.delta
    spend = f"ε = {grouped.epsilon:g}" + (f" and δ = {delta:g}" if delta else "")
    paragraphs = [f"One release per value of {grouped.by} ({len(grouped)} groups); together they spend {spend} in all."]
    if grouped.key_selection is not None:
        paragraphs.append(
            "The groups were selected privately from the data (their share of the budget is counted above): "
            "the keys not kept, and how many there were, are not published."
        )
    else:
        paragraphs.append(f"The values of {grouped.by} are public: they were given, not read from the data.")
    if shared is not None:
        paragraphs += ["Each group's release:", *shared]
    return paragraphs


def grouped_body(grouped: GroupedRelease, column, units, alpha: float, log_x: bool, shared: bool) -> list[str]:
    """The sections of a grouped release's page after the privacy statement (each group's own
    statement in its section unless the groups ``shared`` one)."""
    if not grouped.releases:
        return ['<p class="note">No group was kept by the private key selection: there is nothing to show.</p>']
    rows = [
        [e(key), e(total_row(r.total(), r.public_total is not None, _exact(r), alpha)), e(r.mechanism)]
        for key, r in grouped.items()
    ]
    label = plot_style.axis_label(column, units)
    options = dict(alpha=alpha, column=column, units=units)
    body = ["<h2>Groups</h2>", _table([e(grouped.by), "records", "mechanism"], rows)]
    named = {f"{grouped.by} = {key}": r for key, r in grouped.items()}
    if len(named) <= len(plot_style.GROUP_COLOURS):
        body += [
            "<h2>Cumulative distributions</h2>",
            _figure(
                lambda releases, buffer, **o: plot.plot_groups(
                    releases, buffer, kind="cdf", title=f"Cumulative distribution of {label} by {grouped.by}", **o
                ),
                named,
                f"Cumulative distribution of {label} by {grouped.by}",
                f"The estimated fraction of each group's records at or below each value of {label}.",
                log_x=log_x,
                **options,
            ),
        ]
    else:
        body.append(
            f'<p class="note">The CDFs are drawn on one figure for at most {len(plot_style.GROUP_COLOURS)} groups; '
            f"this release has {len(named)}.</p>"
        )
    body += [
        "<h2>Histograms</h2>",
        _figure(
            lambda g, buffer, **o: g.plot(buffer, **o),
            grouped,
            f"Histograms of {label} by {grouped.by}",
            f"The estimated number of records in each bin of {label}, one panel per group.",
            **options,
        ),
    ]
    for key, r in grouped.items():
        body += [f"<h2>{e(grouped.by)} = {e(key)}</h2>", quantile_section(r, alpha)]
        if not shared:
            body.append(statement_block(privacy_statement(r, column)))
    return body


def report_html(
    release,
    *,
    column=None,
    units: str | None = None,
    alpha: float = 0.05,
    title: str | None = None,
    log_x: bool = False,
    source: str | None = None,
) -> str:
    """The release as one self-contained HTML page (see the module doc).

    ``column``: the column name (a list of names for a grid release), default what the release
    records; ``units``: the values' units; ``alpha``: 1 - the level of every interval;
    ``title``: the page's heading; ``log_x``: logarithmic value axes; ``source``: the file the
    release was read from, named in the footer."""
    grid = is_grid(release)
    grouped = isinstance(release, GroupedRelease)
    shared = None  # the groups' common statement (grouped releases only)
    if grouped:
        first = release.releases[0] if release.releases else None
        name, units = plot_style.describe_column(first, column, units)
        shared = shared_statement(release, name)
        body = grouped_body(release, name, units, alpha, log_x, shared is not None)
    elif grid:
        recorded, _ = plot_style.recorded_columns(release)
        columns = list(column) if isinstance(column, list | tuple) else (list(recorded) if recorded else None)
        name = " × ".join(columns) if columns else None
        body = grid_body(release, columns, alpha)
    else:
        name, units = plot_style.describe_column(release, column, units)
        body = release_body(release, name, units, alpha, log_x)
    heading = title or (f"Private release of {name}" if name else "Private release")
    if grouped and not title:
        heading += f" by {release.by}"
    what = (
        "k-D histogram"
        if grid
        else ("histograms, CDFs and quantiles by group" if grouped else "histogram, CDF and quantiles")
    )
    subtitle = f"differentially private {what}" + (f" · values in {units}" if units and not grid else "")
    paragraphs = grouped_statement(release, shared) if grouped else privacy_statement(release, name)
    footer = f"Made by dprange {e(software_version())}" + (f" from {e(source)}" if source else "") + "."
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(heading)}</title><style>{STYLE}</style></head><body>",
        f"<h1>{e(heading)}</h1>",
        f'<p class="subtitle">{e(subtitle)}</p>',
        "<h2>Privacy</h2>",
        statement_block(paragraphs),
        *body,
        f"<footer>{footer}</footer>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"
