"""`traceql report`: one self-contained HTML page, checked in a real headless Chromium: it loads with no
console error and offline, and its plots drew (the timeline with the slowed kernels among them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.paths import DDP_TRACE, ROOT, RUNS, SINGLE_TRACE
from traceql.commands.detect import detect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = ROOT / ".test-artifacts"  # screenshots to look at (git-ignored)
FOUR_RANKS = RUNS / "gpt2-4rank-nsys"


def render(page_path: Path, png: Path, width: int = 1280) -> dict:
    """Open the page in headless Chromium (no network) at ``width`` pixels: console errors, plot and bar counts,
    the elements that reach past the page's right edge, a screenshot."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"])
        page = browser.new_page(viewport={"width": width, "height": 900})
        errors: list[str] = []
        requests: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        page.goto(page_path.resolve().as_uri())
        page.wait_for_function("document.querySelectorAll('.plot-container svg.main-svg').length > 0")
        counts = page.evaluate("""() => ({
            plots: document.querySelectorAll('.js-plotly-plot').length,
            svgs: document.querySelectorAll('.plot-container svg.main-svg').length,
            bars: document.querySelectorAll('g.trace.bars path').length,
            red: [...document.querySelectorAll('g.trace.bars path')].filter(
                p => (p.style.fill || '').replace(/ /g, '') === 'rgb(214,39,40)').length,
            drawn: [...document.querySelectorAll('.js-plotly-plot')].filter(
                d => d.querySelector('svg.main-svg')).length,
            wider: [...document.querySelectorAll('body *')].filter(
                e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1).length,
            scroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
            text: document.body.innerText})""")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(png), full_page=True)
        shutil.copyfile(png, ARTIFACTS / png.name)
        browser.close()
    return {**counts, "errors": errors, "requests": requests}


def test_report_of_the_embedded_example(invoke, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = invoke("report", "-o", out)
    assert result.exit_code == 0, result.stderr
    # the step with the most time lost but the first captured one (which holds 6.75 of the 10.39 ms lost: each
    # rank's capture began at its own moment)
    assert "wrote" in result.stdout and "step 2 drawn" in result.stdout and result.stderr == ""
    seen = render(out, tmp_path / "report-embedded.png")
    assert seen["errors"] == [] and seen["requests"] == []  # everything inline: not one request left the file
    assert seen["plots"] == 6 and seen["svgs"] >= 6  # the collectives' skew among them (no size: no bandwidth)
    cases = detect(DDP_TRACE, baseline=[SINGLE_TRACE]).kernels
    in_step = cases.filter((cases["step"] == 2) & cases["is_slowdown"]).height
    assert seen["red"] == in_step > 10  # one red bar per slowed kernel of the step drawn
    assert seen["bars"] > 1000
    assert "Top slowed kernels" in seen["text"] and "Kernel2 [cutlass_80_simt_sgemm" in seen["text"]
    assert "What if: what each cause costs a step" in seen["text"]
    assert seen["text"].startswith("Slowdown report: gpt2-nsys\n\nLargest cause: idle costs ")
    assert "overlap saves " in seen["text"] and "no straggler." in seen["text"]


def test_report_of_a_four_rank_run(invoke, tmp_path: Path) -> None:
    out = tmp_path / "four.html"
    assert invoke("report", FOUR_RANKS, "--step", 3, "-o", out).exit_code == 0
    seen = render(out, tmp_path / "report-4rank.png")
    assert seen["errors"] == []
    assert all(f"gpt2-4rank-nsys rank {r}" in seen["text"] for r in range(4))
    assert seen["red"] > 0 and "Timeline of step 3 (the step asked for)" in seen["text"]


def test_report_prices_the_straggler(invoke, tmp_path: Path) -> None:
    from traceql.commands.whatif import whatif

    out = tmp_path / "straggler.html"
    assert invoke("report", RUNS / "gpt2-straggler-nsys", "-o", out).exit_code == 0
    seen = render(out, tmp_path / "report-straggler.png")
    assert seen["errors"] == []
    assert f"gpt2-straggler-nsys: {whatif(RUNS / 'gpt2-straggler-nsys').runs[0].text}." in seen["text"]


def section(page_text: str, heading: str) -> str:
    """The markup of the page's section under ``heading`` ("" when the page has none)."""
    start = page_text.find(f"<h2>{heading}</h2>")
    return "" if start < 0 else page_text[start:page_text.index("</section>", start)]


def test_report_shows_the_collectives(invoke, tmp_path: Path) -> None:
    """Each instance of a step of the DDP run (its buckets size them) in the table, its bandwidth against the
    NVLink 4 peak; a single GPU's run says it has none."""
    from traceql.commands.collectives import collectives

    run = RUNS / "gpt2-4rank-cap2-nsys"
    positions = collectives(run).positions
    assert positions.height == 49 and positions["busbw_gbps"].is_not_null().all()
    out = tmp_path / "cap2.html"
    assert invoke("report", run, "-o", out).exit_code == 0
    text = out.read_text()
    order = [text.index(f"<h2>{h}") for h in ("What if", "Collectives", "Time breakdown")]
    assert order == sorted(order)
    mine = section(text, "Collectives")
    body = mine[mine.index("<tbody>"):mine.index("</tbody>")]
    assert body.count("<tr>") == positions.height
    mine = mine.replace("\\u002f", "/")  # a figure's text as plotly's JSON escapes it
    assert "NVLink 4 peak 450 GB/s" in mine and "(NVLink 4, 450 GB/s one way)" in mine  # the line, the note
    assert "bus bandwidth (GB/s)" in mine and "arrival skew (ms, summed)" in mine
    single = tmp_path / "single.html"
    assert invoke("report", RUNS / "llama-single-nsys", "-o", single).exit_code == 0
    none = section(single.read_text(), "Collectives")
    assert "No collective: the trace's ranks ran no communication kernel" in none and "<table" not in none


def test_report_of_a_dataset(invoke, tmp_path: Path) -> None:
    root = tmp_path / "ds"
    assert invoke("dataset", "add", root, DDP_TRACE, "--baseline", SINGLE_TRACE).exit_code == 0
    out = tmp_path / "ds.html"
    result = invoke("report", root, "-o", out)
    assert result.exit_code == 0, result.stderr
    summary = json.loads(invoke("dataset", "summary", root, "--format", "json").stdout)
    seen = render(out, tmp_path / "report-dataset.png")
    assert seen["errors"] == [] and seen["plots"] == 1
    assert f"{summary[0]['cases']}" in seen["text"] and summary[0]["config"] in seen["text"]


@pytest.mark.parametrize("args,phrase", [
    (["-o", "report.txt"], "a report is an .html file"),
    (["--step", "99", "-o", "r.html"], "the trace has no normal step 99"),
    (["--threshold", "1.0", "-o", "r.html"], "--threshold must be above 1.0"),
])
def test_bad_report_options(invoke, tmp_path: Path, args: list[str], phrase: str) -> None:
    args = [str(tmp_path / a) if a.endswith((".txt", ".html")) else a for a in args]
    result = invoke("report", *args)
    assert result.exit_code == 2 and result.stderr.count("\n") == 1 and phrase in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.parametrize(("name", "inputs"), [
    ("embedded", []), ("four-ranks", [FOUR_RANKS]), ("kineto-straggler", [RUNS / "gpt2-straggler-torch"]),
    ("no-steps", [RUNS.parent / "ncu" / "toy_single_raw12.csv"])])
def test_the_page_holds_its_layout(invoke, tmp_path: Path, width: int, name: str, inputs: list[Path]) -> None:
    """At 1,280 and 1,920 px: nothing reaches past the page (a wide table scrolls inside its box), every plot
    drew, no console error, no request left the file; the screenshots go to .test-artifacts to look at."""
    out = tmp_path / f"{name}.html"
    result = invoke("report", *inputs, "-o", out)
    if name == "no-steps":  # Nsight Compute metrics alone are no timeline: refused, one line
        assert result.exit_code == 2 and result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"error: {inputs[0]}: Nsight Compute metrics are not a timeline"), result.stderr
        return
    assert result.exit_code == 0, result.stderr
    seen = render(out, tmp_path / f"layout-{name}-{width}.png", width)
    assert seen["errors"] == [] and seen["requests"] == []
    assert seen["wider"] == 0 and seen["scroll"] == 0
    assert seen["drawn"] == seen["plots"] >= 4


@pytest.mark.corpus
def test_small_collectives_show_their_size(invoke, tmp_path: Path) -> None:
    """HTA's nccl_parser_config trace moves 424-byte collectives (its records' own sizes, read with the
    collectives relation's oracle: the torch trace's "In msg nelems" times the element size is what the command
    reads; here the rendered table): a size of bytes reads "424 B", not "0.00" MiB."""
    from tests.paths import PUBLIC
    from traceql.commands.collectives import collectives

    trace = PUBLIC / "hta-kineto" / "nccl_parser_config"
    small = sorted({int(b) for b in collectives(trace).positions["bytes"].drop_nulls() if b < 1024})
    assert small, "the trace's small collectives"
    out = tmp_path / "nccl.html"
    assert invoke("report", trace, "-o", out).exit_code == 0
    mine = section(out.read_text(), "Collectives")
    assert all(f">{b} B<" in mine for b in small), small
    assert "<th class='n'>size</th>" in mine and ">MiB<" not in mine


def test_the_collectives_legends_stay_clear_of_the_toolbar() -> None:
    """Plotly draws its toolbar at a figure's top right: the collectives' figures keep their legend at the top
    left, below their title (it sat under the toolbar, at the right)."""
    from traceql.commands.collectives import collectives
    from traceql.export import figures

    found = collectives(RUNS / "gpt2-pair-nsys")
    bandwidth = figures.collective_bandwidth(found.instances.filter(found.instances["busbw_gbps"].is_not_null()),
                                             "t")
    for fig in (bandwidth,):
        legend = fig.layout.legend
        assert (legend.x, legend.xanchor, legend.yanchor) == (0, "left", "bottom") and legend.y > 1
        assert fig.layout.margin.t >= 70 and fig.layout.title.yref == "container"
