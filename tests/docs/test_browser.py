"""The documentation site and the fit report, checked by looking: opened in headless Chromium and
measured by the browser, not by parsing HTML.

What is measured on every page, in a 1440 x 900 window (a common laptop screen):

* **nothing overflows its column**: no element of the page's column (the docs' article, the
  report's body) reaches past the column's edges, unless it sits inside a container that scrolls
  horizontally; the only such containers allowed are those of wide tables, and code, printed
  output and maths must fit without a scroll bar (``scrollWidth <= clientWidth``); the page
  itself never scrolls sideways;
* **maths is rendered**: the maths is MathML (written while the site is built) that Chromium
  lays out as maths (a ``math`` element whose computed ``display`` is ``block math`` or
  ``inline math``, with a size), and no ``$...$`` or TeX command is left in the text outside
  code;
* **navigation on every page**: the top bar's links, and a sidebar with links on every page
  that has one (no empty "Section Navigation");
* the report (``genpqr fit`` on the bundled data set, with ``--features``, ``--bootstrap`` and ``--infer``):
  a table of contents linking every section, wide tables in scroll containers, no heading or
  label repeated.

The site: with ``GENPQR_DOCS_SITE=DIR`` the site already built there (``make docs-check`` after
``make docs``: the full site, every page); otherwise a reduced site built here in a temporary
folder (about a minute): the guide, the glossary and the other pages in full, the API pages of
the modules of :data:`REDUCED_API` (the main classes: ``GenPQR``, ``Transitions``,
``StructuralFit``, ``CounterfactualResult``) and the gallery with only
:data:`REDUCED_GALLERY` run (the other examples are shown without their output). The full,
strict build is ``make docs`` (CI).

Chromium and its driver come from Debian's packages (``chromium``, ``chromium-driver``;
``make chromium`` installs them): the tests skip, saying so, when they are missing, except in CI
(``CI`` set), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WINDOW = (1440, 900)
REDUCED_API = ("genpqr", "genpqr.normalization", "genpqr.structural", "genpqr.counterfactuals")
REDUCED_GALLERY = r"plot_1_"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run")
#: Pages of a built site that are not pages of the documentation (the indexes, the gallery's table
#: of running times).
NOT_PAGES = {"genindex.html", "search.html", "py-modindex.html", "sg_execution_times.html",
             "gallery/sg_execution_times.html"}


def _missing(reason: str):
    if os.environ.get("CI"):
        pytest.fail(f"{reason}: CI must run the browser checks (make chromium installs Chromium)")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def browser():
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        _missing(f"no headless Chromium ({CHROMIUM}, {CHROMEDRIVER}; Debian: apt-get install chromium "
                 "chromium-driver, or make chromium)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed (requirements-dev.txt)")
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager: never look for a driver online
    profile = tempfile.mkdtemp(prefix="genpqr-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WINDOW[0]},{WINDOW[1]}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# ------------------------------------------------------------------------------------ the site
def build_reduced_site(out: Path) -> Path:
    """The reduced site (module docstring), built from a copy of docs/ so that nothing is written
    into the checkout; returns the folder of its HTML pages."""
    source = out / "tree"
    shutil.copytree(ROOT / "docs", source / "docs",
                    ignore=shutil.ignore_patterns("api", "gallery", "sg_execution_times.rst", "results"))
    for name in ("src", "examples"):
        (source / name).symlink_to(ROOT / name, target_is_directory=True)
    env = dict(os.environ, GENPQR_DOCS_API=",".join(REDUCED_API), GENPQR_DOCS_GALLERY=REDUCED_GALLERY,
               MPLBACKEND="Agg", OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    html = out / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-D", "nitpicky=0",
                           str(source / "docs"), str(html)], env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"the reduced documentation site did not build:\n{proc.stderr[-3000:]}"
    return html


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    given = os.environ.get("GENPQR_DOCS_SITE")
    if given:
        folder = Path(given)
        assert (folder / "index.html").exists(), f"GENPQR_DOCS_SITE={given} holds no built site (run make docs)"
        return folder
    return build_reduced_site(tmp_path_factory.mktemp("docs-site"))


def site_pages(site: Path) -> list[Path]:
    pages = []
    for page in sorted(site.rglob("*.html")):
        rel = page.relative_to(site)
        if rel.parts[0].startswith("_") or rel.as_posix() in NOT_PAGES:
            continue
        pages.append(page)
    return pages


# --------------------------------------------------------------------------- the measurements
#: JavaScript: what overflows the columns ``arguments[0]`` (CSS selectors: the first is the page's
#: main column and must exist), as readable lines.
OVERFLOW_JS = r"""
const found = [];
const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
  (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\s+/).join('.') : '');
const text = el => (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 80);
const scrolls = el => ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(el).overflowX);
const isTableBox = el => el.querySelector('table') !== null && el.querySelector('pre') === null;
// text of the element itself (a title too long for its box), not of its children, which are measured apart
const ownText = el => [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
if (document.documentElement.scrollWidth > window.innerWidth + 1)
  found.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px wide in a ' +
             window.innerWidth + ' px window');
arguments[0].forEach((selector, i) => {
  const column = document.querySelector(selector);
  if (!column) { if (i === 0) found.push('no element ' + selector + ' on the page'); return; }
  const edge = column.getBoundingClientRect();
  for (const el of column.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width <= 2 || box.height <= 2) continue;  // nothing, or a label for screen readers only
    let clipped = false;
    for (let a = el.parentElement; a && a !== column; a = a.parentElement) if (scrolls(a)) { clipped = true; break; }
    if (clipped) continue;
    if (box.right > edge.right + 1 || box.left < edge.left - 1)
      found.push(name(el) + ' reaches ' + Math.round(box.left - edge.left) + '..' + Math.round(box.right - edge.left) +
                 ' px in a column of ' + Math.round(edge.width) + ' px: "' + text(el) + '"');
    else if (scrolls(el) ? el.scrollWidth > el.clientWidth + 1 && !isTableBox(el)
                         : el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1 && ownText(el))
      found.push(name(el) + (scrolls(el) ? ' scrolls sideways (' : ' spills over (') + el.scrollWidth +
                 ' px of content in ' + el.clientWidth + ' px): "' + text(el) + '"');
  }
});
return found;
"""

#: JavaScript: the maths of the column ``arguments[0]``: ``[n math elements, problems]``.
MATH_JS = r"""
const column = document.querySelector(arguments[0]);
const found = [];
const maths = column ? column.querySelectorAll('math') : [];
for (const m of maths) {
  const display = getComputedStyle(m).display;
  const box = m.getBoundingClientRect();
  if (!display.includes('math')) found.push('a math element not laid out as maths (display: ' + display + ')');
  else if (box.width === 0 || box.height === 0) found.push('a math element with no size');
}
if (column) {
  const prose = column.cloneNode(true);
  for (const code of prose.querySelectorAll('pre, code, .highlight, math, script, style, .sphx-glr-script-out'))
    code.remove();
  const text = prose.textContent;
  for (const pattern of [/\$[^$\s][^$\n]*\$/, /\\(frac|sum|mu|pi|gamma|log|mathrm|hat|left|right)\b/]) {
    const m = text.match(pattern);
    if (m) found.push('raw TeX in the text: "' + m[0].slice(0, 60) + '"');
  }
}
return [maths.length, found];
"""

#: JavaScript: the navigation: ``[top-bar links, sidebar links or -1 without a sidebar, empty titles]``.
NAV_JS = r"""
const top = document.querySelectorAll('.bd-header a.nav-link').length;
const nav = document.querySelector('#pst-primary-sidebar nav.bd-docs-nav');
const side = nav ? nav.querySelectorAll('a').length : -1;
const empty = [...document.querySelectorAll('.bd-links__title')].filter(
  t => t.parentElement.querySelectorAll('a').length === 0).map(t => t.textContent.trim());
return [top, side, empty];
"""


def open_page(browser, path: Path) -> None:
    """Load a page and wait until it and its style sheets are loaded."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(path.resolve().as_uri())
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return document.readyState") == "complete")


def overflow(browser, *columns: str) -> list[str]:
    return browser.execute_script(OVERFLOW_JS, list(columns))


# ------------------------------------------------------------------------------- docs site
#: The docs' columns: the article, then the two sidebars (each of which must hold its own content).
COLUMNS = ("article.bd-article", "#pst-primary-sidebar", "#pst-secondary-sidebar")


@pytest.fixture(scope="module")
def measured(browser, site) -> dict:
    """``{page: (overflow lines, (n maths, maths problems), (top links, sidebar links, empty titles))}``:
    every page opened once, all measurements taken there."""
    results = {}
    for page in site_pages(site):
        open_page(browser, page)
        found = overflow(browser, *COLUMNS)
        if found and found[0].startswith("no element"):  # a page still being laid out: once more
            open_page(browser, page)
            found = overflow(browser, *COLUMNS)
        results[page.relative_to(site).as_posix()] = (found, browser.execute_script(MATH_JS, COLUMNS[0]),
                                                      browser.execute_script(NAV_JS))
    return results


def overflow_problems(measured: dict) -> dict:
    return {page: found[:5] for page, (found, _, _) in measured.items() if found}


def maths_problems(measured: dict) -> dict:
    problems = {page: maths[1][:5] for page, (_, maths, _) in measured.items() if maths[1]}
    counts = {page: maths[0] for page, (_, maths, _) in measured.items()}
    # the pages that have maths do show it: the guide, the glossary and a docstring's formulas
    for page in ("python_api.html", "glossary.html", "api/genpqr.normalization.html"):
        if counts.get(page) == 0:
            problems[page] = ["shows no maths"]
    if sum(counts.values()) < 20:
        problems["(the site)"] = [f"only {sum(counts.values())} formulas in all"]
    return problems


def navigation_problems(measured: dict) -> dict:
    problems = {}
    for page, (_, _, (top, side, empty)) in measured.items():
        # conf.py: no sidebar on single names' pages; the front page is itself a page of links
        sidebar = not page.startswith("api/generated/") and page != "index.html"
        if top < 4 or empty or (sidebar and side < 4):
            problems[page] = f"top-bar links {top}, sidebar links {side}, empty navigation titles {empty}"
    return problems


def content_problems(site: Path) -> dict:
    """The API pages of the main classes have a numpydoc Examples section (run as doctests by
    test_docstring_examples.py), and no gallery cell ending in a plotting call shows a
    ``<matplotlib.legend.Legend at 0x...>`` line."""
    problems = {}
    for name in ("genpqr.GenPQR", "genpqr.Transitions", "genpqr.structural.StructuralFit",
                 "genpqr.counterfactuals.CounterfactualResult"):
        page = site / "api" / "generated" / f"{name}.html"
        if not page.exists() or '<p class="rubric">Examples</p>' not in page.read_text(encoding="utf-8"):
            problems[f"api/generated/{page.name}"] = "no Examples section"
    for page in sorted((site / "gallery").glob("plot_*.html")):
        if re.search(r"&lt;matplotlib\.\w+\.\w+ (object )?at 0x", page.read_text(encoding="utf-8")):
            problems[f"gallery/{page.name}"] = "shows a matplotlib object's repr"
    return problems


@pytest.mark.slow
def test_the_documentation_site_reads_well(measured, site):
    """Every page: nothing wider than its column, the maths rendered, navigation; the main
    classes' Examples and a gallery without stray reprs (one test: the site is built once)."""
    problems = {"elements wider than their column in a {0} px window".format(WINDOW[0]): overflow_problems(measured),
                "maths not rendered": maths_problems(measured),
                "navigation missing": navigation_problems(measured),
                "content": content_problems(site)}
    problems = {kind: found for kind, found in problems.items() if found}
    assert not problems, "\n".join(f"{kind}: {found}" for kind, found in problems.items())


# ------------------------------------------------------------------------------- the report
@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """report.html of ``genpqr fit`` on the bundled data set, with the structural parameters of
    its features, a bootstrap and ``--infer`` targets, one of them flagged (the report's widest
    tables and every section)."""
    from genpqr import datasets
    from genpqr.app.cli import main

    out = tmp_path_factory.mktemp("report") / "fit"
    code = main(["fit", str(datasets.path("choices")), "--episode", "episode", "--time", "time", "--state", "state",
                 "--action", "action", "--gamma", "0.9", "--normalization", "anchor:a", "--features",
                 str(datasets.path("features")), "--bootstrap", "20", "--infer", "value:uniform;gamma=0.8",
                 "--infer", "reward-at:13=c", "--infer", "projection", "--out", str(out)])
    assert code == 0
    return out / "report.html"


#: JavaScript: the report's table of contents and headings.
REPORT_JS = r"""
const toc = document.querySelector('nav.toc');
const links = toc ? [...toc.querySelectorAll('a')].map(a => a.getAttribute('href')) : [];
const headings = [...document.querySelectorAll('h2, h3')].map(h => [h.tagName, h.id, h.textContent.trim()]);
const wide = [...document.querySelectorAll('table')].filter(t => t.scrollWidth > document.body.clientWidth)
  .filter(t => !t.parentElement.classList.contains('scroll')).length;
const rows = [...document.querySelectorAll('tr')].map(r => [...r.children].map(c => c.textContent.trim()));
const figures = [...document.querySelectorAll('figure')].map(f => {
  const svg = f.querySelector('svg'); const box = svg ? svg.getBoundingClientRect() : null;
  return [svg ? box.width : 0, svg ? box.height : 0, f.querySelectorAll('svg text').length];});
return [links, headings, wide, rows, document.querySelector('main').innerText, figures];
"""


def test_the_report_reads_well(browser, report):
    open_page(browser, report)
    found = overflow(browser, "main", "nav.toc")
    assert not found, found
    links, headings, wide_unscrolled, rows, text, figures = browser.execute_script(REPORT_JS)
    assert links, "report.html has no table of contents (nav.toc)"
    sections = [h for h in headings if h[0] == "H2"]
    assert len(sections) >= 7
    for tag, anchor, title in headings:
        if tag == "H2":
            assert anchor and f"#{anchor}" in links, f"section {title!r} is not in the table of contents"
    for link in links:
        assert any(f"#{h[1]}" == link for h in headings), f"the table of contents links to a missing {link}"
    titles = [title.lower() for _, _, title in headings]
    assert len(titles) == len(set(titles)), f"repeated headings: {titles}"
    assert text.lower().count("where the reward's uncertainty comes from") == 1
    assert wide_unscrolled == 0, "a table wider than the page outside a scroll container"
    repeated = [row for row in rows if len(row) == 2 and row[1].lower().startswith(row[0].lower() + ":")]
    assert not repeated, f"rows that repeat their label: {repeated}"
    # every figure is an inline SVG the browser lays out with a size, and its axes carry text
    assert len(figures) >= 6 and all(w > 150 and h > 100 and n >= 3 for w, h, n in figures), figures


def test_the_report_checks_fail_on_what_they_look_for(browser, tmp_path):
    """The measurements are not vacuous: a page with a wide unscrolled table, a scrolling code
    block and raw TeX fails them; the same content made to fit passes."""
    bad = tmp_path / "bad.html"
    bad.write_text("<html><body style='width:600px'><table><tr>" + "<td>column</td>" * 40 + "</tr></table>"
                   "<pre style='overflow-x:auto'>" + "x" * 300 + "</pre><p>the reward $r(s, a)$ and \\frac{1}{2}</p>"
                   "<h1>genpqr.counterfactuals.AVeryLongNameOfAClassThatCannotBreak</h1></body></html>",
                   encoding="utf-8")
    open_page(browser, bad)
    found = overflow(browser, "body")
    assert any(f.startswith("table") for f in found) and any("scrolls sideways" in f for f in found), found
    assert any(f.startswith("h1 spills over") for f in found), found
    assert len(browser.execute_script(MATH_JS, "body")[1]) == 2
    good = tmp_path / "good.html"
    good.write_text("<html><body style='width:600px'><div style='overflow-x:auto'><table><tr>" + "<td>column</td>" * 40
                    + "</tr></table></div><pre style='white-space:pre-wrap'>" + "x " * 150 + "</pre>"
                    "<p>the reward <math><mi>r</mi></math></p></body></html>", encoding="utf-8")
    open_page(browser, good)
    assert overflow(browser, "body") == []
    assert browser.execute_script(MATH_JS, "body") == [1, []]
