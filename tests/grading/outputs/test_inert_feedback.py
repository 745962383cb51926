"""The feedback page is inert: what a student made is shown, never run, and bounded in size (no kernel, no Spark).

A notebook with every attack that reached the instructor's feedback page before (a script in an HTML output,
an onerror attribute, a javascript: link, an SVG's onload, raw HTML in markdown, output metadata written into
an <img> tag, widget state) plus 4 x 2 MB images is rendered the way nbgrader's GenerateFeedback renders it:
its HTMLExporter, its feedback template and the preprocessors nbgrader_config.py gives it (with GetGrades,
which reads the gradebook, replaced by the scores it would set). Then the page is made inert as the worker
makes it, and read back as a browser would read its tags.
"""
from __future__ import annotations

import base64
import re
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from streamlab.grading import Result, Status, nbgrader_config
from streamlab.grading.bounds import CELL_OUTPUT_BYTES, MB, NOTEBOOK_OUTPUT_BYTES
from streamlab.grading.outputs.feedback import (
    CONTENT_SECURITY_POLICY,
    inert_feedback_pages,
    make_inert,
    markdown_html,
    sanitize_html,
    status_page,
)

v4 = nbformat.v4
ATTACKER = "https://attacker.invalid"
TITLE = "lab01_inert"          # the page's own title: still the title after a browser ran the page
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()

HOSTILE_MARKDOWN = f"""\
## My answer

Some **bold** text, a table and a [fine link](https://example.org/docs).

| a | b |
|---|---|
| 1 | 2 |

<img src=x onerror="document.title='pwned-md-img'">
[click me](javascript:document.title='pwned-md-link')
<a href="jav&#x61;script:document.title='pwned-md-entity'">entity link</a>
<svg onload="document.title='pwned-md-svg'"><circle r="5"/></svg>
<iframe src="{ATTACKER}/frame"></iframe>
<object data="{ATTACKER}/object"></object><embed src="{ATTACKER}/embed">
<meta http-equiv="refresh" content="0;url={ATTACKER}/refresh">
<base href="{ATTACKER}/">
<form action="{ATTACKER}/form"><input name="q"><button>send</button></form>
<div style="background: url({ATTACKER}/css.png); color: red">styled</div>
<script>document.title='pwned-md-script'</script>
![tracker]({ATTACKER}/pixel.png)

A code span is text: `[x](javascript:document.title='pwned-md-span')`.
"""


def _display(data: dict, metadata: dict | None = None):
    return v4.new_output("display_data", data=data, metadata=metadata or {})


def hostile_notebook() -> nbformat.NotebookNode:
    answer = v4.new_markdown_cell(HOSTILE_MARKDOWN, metadata={"nbgrader": {
        "solution": True, "grade": True, "grade_id": "written", "points": 1, "locked": False}})
    code = v4.new_code_cell("display(HTML(...))", execution_count=1, metadata={"nbgrader": {
        "solution": True, "grade": False, "grade_id": "answer", "locked": False}})
    code.outputs = [
        _display({"text/html": "<b>fine html</b><script>document.title='pwned-html-script'</script>"
                               "<img src=x onerror=\"document.title='pwned-html-img'\">",
                  "text/plain": "<IPython.core.display.HTML object>"}),
        _display({"text/html": "<p>isolated</p>"}, {"text/html": {"isolated": True}}),  # an <iframe> otherwise
        _display({"application/javascript": "document.title='pwned-js'"}),
        _display({"application/vnd.jupyter.widget-view+json": {"model_id": "x", "version_major": 2},
                  "text/plain": "IntSlider(value=3)"}),
        _display({"image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg' onload=\"document.title='pwned-svg'\">"
                                   "<script>document.title='pwned-svg-script'</script><circle r='5'/></svg>"}),
        _display({"text/markdown": "[md link](javascript:document.title='pwned-output-md') <b onclick=x>md</b>",
                  "text/plain": "md"}),
        _display({"text/latex": "$x$ <script>document.title='pwned-latex'</script>"}),
        # nbconvert writes an image's width into the <img> tag without quotes
        _display({"image/png": PNG}, {"image/png": {"width": "1 onerror=document.title='pwned-width'"},
                                      "filenames": {"image/png": f"{ATTACKER}/file.png"}}),
        v4.new_output("stream", name="stdout", text="<script>document.title='pwned-stream'</script>\n"),
        v4.new_output("error", ename="ValueError", evalue="<img src=x onerror=alert(1)>",
                      traceback=["<script>document.title='pwned-traceback'</script>"]),
    ]
    raw = v4.new_raw_cell("<script>document.title='pwned-raw'</script><b>raw</b>",
                          metadata={"raw_mimetype": "text/html"})
    big = v4.new_code_cell("show_four_big_images()", execution_count=2)
    two_mb = "A" * (2 * MB)
    big.outputs = [_display({"image/png": two_mb, "text/plain": "<Figure>"}) for _ in range(4)]
    # 6 cells of 0.9 MB: 5 fit in the notebook's 5 MB, the 6th does not
    fills = []
    for number in range(6):
        cell = v4.new_code_cell(f"plot({number})", execution_count=3 + number)
        cell.outputs = [_display({"image/png": "B" * (9 * MB // 10)})]
        fills.append(cell)
    nb = v4.new_notebook(cells=[answer, code, raw, big, *fills])
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {}, "note": "</script><script>document.title='pwned-widget-state'</script>"}}
    return nb


def nbgrader_page(nb, tmp_path: Path, preprocessors=None, config=None) -> str:
    """``nb`` as nbgrader's GenerateFeedback writes it: its exporter, with nbgrader_config.py's preprocessors
    (or ``preprocessors``) but GetGrades, configured by ``config`` (nbgrader_config.py's by default)."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import GetGrades

    config = config or nbgrader_config(tmp_path / "course")
    converter = GenerateFeedback(coursedir=CourseDirectory(config=config), config=config)
    exporter = converter.exporter_class(parent=converter, config=converter.config)  # as GenerateFeedback.start() does
    for preprocessor in converter.preprocessors if preprocessors is None else preprocessors:
        if preprocessor is not GetGrades:
            exporter.register_preprocessor(preprocessor)
    for cell in nb.cells:       # what GetGrades sets from the gradebook
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader.setdefault("score", 0.0)
    resources = {"nbgrader": {"notebook": TITLE, "score": 1.0, "max_score": 2.0, "late_penalty": 0}}
    return exporter.from_notebook_node(nb, resources=resources)[0]


def feedback_page(nb, tmp_path: Path) -> str:
    """``nb``'s feedback page, made inert as the worker makes it."""
    page = nbgrader_page(nb, tmp_path)
    folder = tmp_path / "feedback"
    folder.mkdir()
    (folder / f"{TITLE}.html").write_text(page, encoding="utf-8")
    [written] = inert_feedback_pages(folder)
    return written.read_text(encoding="utf-8")


class Tags(HTMLParser):
    """Every start tag of a page, as (tag, attributes, in <body>?), and the text of its script elements."""

    def __init__(self, page: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict, bool]] = []
        self.scripts: list[str] = []
        self._body = self._script = False
        self.feed(page)
        self.close()

    def handle_starttag(self, tag, attrs):
        self._body = self._body or tag == "body"
        self._script = tag == "script"
        self.tags.append((tag, {k: v or "" for k, v in attrs}, self._body))

    def handle_endtag(self, tag):
        self._script = self._script and tag != "script"

    def handle_data(self, data):
        if self._script:
            self.scripts.append(data)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    return feedback_page(hostile_notebook(), tmp_path_factory.mktemp("inert"))


def test_nbgrader_config_makes_feedback_inert_after_hiding_tests(tmp_path):
    from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests
    from streamlab.grading.steps.inert_feedback import InertFeedback

    preprocessors = list(nbgrader_config(tmp_path).GenerateFeedback.preprocessors)
    assert preprocessors.index(HideHiddenTests) < preprocessors.index(InertFeedback)


def test_no_student_script_handler_or_script_url(page):
    tags = Tags(page)
    scripts = [(tag, attrs) for tag, attrs, in_body in tags.tags if tag == "script"]
    # nbconvert's own (MathJax) in <head> only; the policy stops them too
    assert all(not in_body for tag, _, in_body in tags.tags if tag == "script"), scripts
    assert not [s for s in tags.scripts if "pwned" in s]
    handlers = [(tag, name) for tag, attrs, _ in tags.tags for name in attrs if name.startswith("on")]
    assert not handlers
    urls = [(tag, name, value) for tag, attrs, _ in tags.tags for name, value in attrs.items()
            if re.sub(r"[\x00-\x20]", "", value).lower().startswith(("javascript:", "vbscript:", "data:text"))]
    assert not urls
    assert "pwned" not in " ".join(value for _, attrs, _ in tags.tags for value in attrs.values())


def test_nothing_that_frames_navigates_or_fetches(page):
    tags = Tags(page)
    assert not [t for t, _, _ in tags.tags if t in ("iframe", "object", "embed", "base", "form", "link", "svg")]
    metas = [attrs for tag, attrs, _ in tags.tags if tag == "meta" and "http-equiv" in attrs]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": CONTENT_SECURITY_POLICY}]
    assert not [attrs for tag, attrs, _ in tags.tags if tag == "img" and not attrs.get("src", "").startswith(
        "data:image/")]
    assert not [attrs for _, attrs, _ in tags.tags if "url(" in attrs.get("style", "")]
    assert ATTACKER not in " ".join(value for _, attrs, _ in tags.tags for value in attrs.values())


def test_the_policy_is_the_first_element_of_head(page):
    tags = Tags(page).tags
    assert [t for t, _, _ in tags[:4]] == ["html", "head", "meta", "meta"]
    assert tags[2][1] == {"http-equiv": "Content-Security-Policy", "content": CONTENT_SECURITY_POLICY}
    assert tags[3][1] == {"name": "referrer", "content": "no-referrer"}
    assert page.startswith("<!DOCTYPE html>")


def test_outputs_are_bounded_per_cell_and_per_notebook(page):
    assert len(page.encode()) < 6 * MB
    per_cell = f"over the limit of {CELL_OUTPUT_BYTES / MB:.1f} MB for one cell"
    per_notebook = f"over the limit of {NOTEBOOK_OUTPUT_BYTES / MB:.1f} MB for the whole notebook"
    assert page.count(f"it was 2.0 MB, {per_cell}") == 4
    assert page.count(per_notebook) == 1
    assert page.count('src="data:image/png;base64,BBBB') == 5          # the images that fit are shown


def test_what_the_student_made_still_reads(page):
    assert "<strong>bold</strong>" in page and '<a href="https://example.org/docs">fine link</a>' in page
    assert "<th>a</th>" in page and "<td>2</td>" in page                 # the markdown table
    assert "<b>fine html</b>" in page and "<p>isolated</p>" in page
    assert "[a script was left out]" in page
    assert "&lt;script&gt;document.title='pwned-stream'&lt;/script&gt;" in page   # text, shown as text
    assert '<img alt="SVG image" src="data:image/svg+xml;base64,' in page         # an image: runs nothing
    assert f'src="data:image/png;base64,{PNG}"' in page
    assert "IntSlider(value=3)" in page and "application/javascript" in page
    assert "<code>[x](javascript:document.title='pwned-md-span')</code>" in page    # still a code span
    assert "styled" in page and "send" in page                           # their text stays


def test_the_attacks_are_real(tmp_path):
    """With the preprocessors nbgrader_config.py had before InertFeedback, the same notebook's page runs the
    student's scripts and handlers (so the tests above test something)."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

    from streamlab.grading.steps.hide_hidden_tests import HideHiddenTests

    nb = hostile_notebook()
    nb.cells = nb.cells[:2]
    page = nbgrader_page(nb, tmp_path, [HideHiddenTests, CSSHTMLHeaderPreprocessor])
    tags = Tags(page)
    assert [s for s in tags.scripts if "pwned-html-script" in s] and [s for s in tags.scripts if "pwned-js" in s]
    assert [attrs for tag, attrs, _ in tags.tags if tag == "img" and "onerror" in attrs]
    assert [attrs for tag, attrs, _ in tags.tags if tag == "a" and attrs.get("href", "").startswith("javascript:")]
    assert [tag for tag, _, _ in tags.tags if tag in ("iframe", "base", "form")]
    assert "Content-Security-Policy" not in page


def test_make_inert_puts_the_policy_before_anything_else():
    hostile = ('<!-- x --><script>document.title="early"</script><html onload="x" lang="de"><head>'
               '<meta http-equiv="refresh" content="0;url=https://attacker.invalid/"><base href="https://a.invalid/">'
               '</head><body><META HTTP-EQUIV=Refresh content=0></body></html>')
    page = make_inert(hostile)
    tags = Tags(page).tags
    assert [t for t, _, _ in tags[:4]] == ["html", "head", "meta", "meta"]
    assert tags[0][1] == {} and tags[2][1]["content"] == CONTENT_SECURITY_POLICY
    assert page.index(CONTENT_SECURITY_POLICY) < page.index("<script>")
    assert not [a for t, a, _ in tags if t == "meta" and a.get("http-equiv", "").lower() == "refresh"]
    assert not [t for t, _, _ in tags if t == "base"]
    assert make_inert(page) == page
    plain = make_inert('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8"><title>t</title></head>')
    assert plain.startswith('<!DOCTYPE html>\n<html lang="en"><head><meta http-equiv="Content-Security-Policy"')
    assert '<meta charset="utf-8"><title>t</title>' in plain and make_inert(plain) == plain
    assert make_inert("<p>no head at all</p>").endswith("no-referrer\">\n<p>no head at all</p>")


def test_status_page_and_summary_are_inert(tmp_path):
    from streamlab.grading.outputs.summary import write_summary

    for page in (status_page(Result(student="a", status=Status.CRASHED), "lab01"),
                 write_summary(tmp_path, "lab01", []).read_text()):
        tags = Tags(page).tags
        assert [t for t, _, _ in tags[:3]] == ["html", "head", "meta"]
        assert tags[2][1] == {"http-equiv": "Content-Security-Policy", "content": CONTENT_SECURITY_POLICY}
        assert make_inert(page) == page


@pytest.mark.parametrize("attack, kept", [
    ('<img src=x onerror="alert(1)">', ""),
    ('<img src="data:image/png;base64,AAAA" width=3 onerror=x>', '<img src="data:image/png;base64,AAAA" width="3">'),
    ('<a href=" JaVa&#x53;cript:alert(1)">x</a>', "<a>x</a>"),
    ('<a href="java\tscript:alert(1)">x</a>', "<a>x</a>"),
    ('<a href="data:text/html,x">x</a>', "<a>x</a>"),
    ('<a href="https://e.invalid/?a=1&amp;b=2" onclick=x>ok</a>', '<a href="https://e.invalid/?a=1&amp;b=2">ok</a>'),
    ('<svg onload=alert(1)><text>hi</text></svg>', "hi"),
    ("<textarea><img src=x onerror=alert(1)></textarea>", "&lt;img src=x onerror=alert(1)&gt;"),
    ('<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>', '"&gt;'),
    ("<scr<script>ipt>alert(1)</script>", "ipt&gt;alert(1)"),
    ("<b title='&quot;&gt;&lt;img onerror=x&gt;'>t</b>", '<b title="&quot;&gt;&lt;img onerror=x&gt;">t</b>'),
    ('<div style="color: red; position: fixed; background: url(x)">r</div>', '<div style="color: red">r</div>'),
    ("<ul><li>a<li>b</ul><p>open <a href='#x'>link", '<ul><li>a</li><li>b</li></ul><p>open <a href="#x">link</a></p>'),
    ("</div></div></body>after", "after"),
    ('<a href="x', ""),
])
def test_sanitize_html(attack, kept):
    assert sanitize_html(attack) == kept


def test_sanitize_html_reads_crafted_input_in_one_pass():
    # bleach's parser and the standard library's take minutes on each of these (quadratic); the suite's
    # timeout would stop this test if the sanitiser were ever one of them again
    for crafted in ("</a" * 300_000, "<a b='" * 150_000, "<a b=x" * 150_000, "<" * 500_000, "<b>" * 300_000):
        assert "<a " not in sanitize_html(crafted)


def test_text_is_bounded_too_and_apart_from_outputs():
    from streamlab.grading.steps.inert_feedback import InertFeedback

    image = {"image/png": "C" * (3 * CELL_OUTPUT_BYTES // 2)}
    markdown = v4.new_markdown_cell("![big](attachment:big.png)", attachments={"big.png": image})
    code = v4.new_code_cell("x = 1\n" * (CELL_OUTPUT_BYTES // 4))
    flood = [v4.new_code_cell("plot()") for _ in range(8)]
    for cell in flood:
        cell.outputs = [_display({"image/png": "D" * (CELL_OUTPUT_BYTES - 1000)})]
    lab_text = v4.new_markdown_cell("## Part B\n\nThe lab's own text.")
    nb, _ = InertFeedback().preprocess(v4.new_notebook(cells=[markdown, code, *flood, lab_text]), {})
    assert "text left out of this feedback: it was 1.5 MB" in nb.cells[0].source and "CCCC" not in nb.cells[0].source
    assert nb.cells[1].source.startswith("x = 1\nx = 1\n") and len(nb.cells[1].source) < 11_000
    assert nb.cells[1].source.endswith("over the limit of 1.0 MB for one cell]")
    shown = [cell.outputs[0].output_type for cell in flood]
    assert shown == ["display_data"] * 5 + ["stream"] * 3 and "whole notebook" in flood[-1].outputs[0].text
    assert "<p>The lab's own text.</p>" in nb.cells[-1].source        # a flood of outputs hides no text


def test_markdown_with_a_missing_attachment_is_shown_not_fatal():
    assert "attachment:nope.png" in markdown_html("![x](attachment:nope.png)")


def test_output_metadata_and_grade_ids_cannot_write_attributes(tmp_path):
    cell = v4.new_code_cell("x", metadata={"nbgrader": {"solution": True, "grade": True, "points": 1,
                                                         "grade_id": 'q1"><script>document.title=1</script>'}})
    cell.outputs = [_display({"image/png": PNG}, {"image/png": {"width": 40, "height": "x onerror=y"}})]
    page = feedback_page(v4.new_notebook(cells=[cell]), tmp_path)
    img = [attrs for tag, attrs, _ in Tags(page).tags if tag == "img"]
    assert img == [{"src": f"data:image/png;base64,{PNG}", "width": "40",
                    "alt": "No description has been provided for this image"}]
    tags = Tags(page)
    anchors = [attrs["name"] for tag, attrs, _ in tags.tags if tag == "a" and "name" in attrs]
    assert 'q1"><script>document.title=1</script>' in anchors           # an attribute's value, nothing more
    assert not [tag for tag, _, in_body in tags.tags if tag == "script" and in_body]


@pytest.mark.browser
def test_no_student_script_runs_in_a_browser(page, tmp_path):
    from browser import INSTALL, Chromium, chromium_path

    if chromium_path() is None:
        pytest.skip(f"no Chromium here: {INSTALL}")
    path = tmp_path / "feedback.html"
    path.write_text(page, encoding="utf-8")
    with Chromium() as browser:
        tab = browser.new_page()
        tab.goto(path.as_uri())
        assert tab.evaluate("document.title") == TITLE
        assert tab.evaluate("document.body.innerText.includes('fine html')")
        assert tab.evaluate("location.href") == path.as_uri()       # no refresh, no base
        # nothing the student wrote was even asked for (nbconvert's MathJax is asked for, and blocked)
        assert not [url for url in tab.requests if ATTACKER in url], tab.requests


def test_the_checks_block_is_a_feedback_step_and_stays_the_graders(tmp_path):
    """The block "Checked by the grader" is put in by a preprocessor of nbgrader's generate_feedback, after
    InertFeedback: first in the notebook, under nbgrader's score, shown as HTML (its figure included), while a
    check's words, which hold what the student made, stay text."""
    from streamlab.grading.outputs.results import CheckResult
    from streamlab.grading.steps.checks_block import with_checks_block

    attack = "<script>document.title='pwned-check'</script>"
    trace = {"title": "counts", "diverged_at": 1, "rows": [
        {"batch": 0, "yours": 1, "reference": 1, "differ": 0, "example": ""},
        {"batch": 1, "yours": 3, "reference": 2, "differ": 1, "example": f"'{attack}': yours 3, reference 2"}]}
    verdicts = [CheckResult("counts", ["test_b"], False, f"wrong {attack}", [trace])]
    config = nbgrader_config(tmp_path / "course")
    with_checks_block(config, verdicts)
    steps = list(config.GenerateFeedback.preprocessors)
    names = [step.__name__ for step in steps]
    assert names.index("ChecksBlock") == names.index("InertFeedback") + 1
    nb = v4.new_notebook(cells=[v4.new_markdown_cell("# The lab"), v4.new_code_cell("x = 1")])
    page = nbgrader_page(nb, tmp_path, preprocessors=steps, config=config)
    assert page.count("Checked by the grader") == 1
    assert page.index("Score: 1.0 / 2.0") < page.index("Checked by the grader") < page.index('id="The-lab"')
    tags = Tags(page)
    assert ("svg", True) in {(tag, body) for tag, _, body in tags.tags}, "the state trace is drawn"
    assert not [s for s in tags.scripts if "pwned" in s] and "&lt;script&gt;document.title" in page


def test_a_chinese_notebooks_feedback_page_says_nbgraders_words_in_chinese(tmp_path):
    """nbgrader's own feedback template, its words in Chinese, made from the installed nbgrader's: every word of the
    table is still in it (a new nbgrader that changed one fails here, and its pages would stay English)."""
    from streamlab.grading.outputs.languages import FEEDBACK_TEMPLATE, chinese_feedback_template

    assert chinese_feedback_template(tmp_path / "templates")
    config = nbgrader_config(tmp_path / "course")
    config.HTMLExporter.template_name = FEEDBACK_TEMPLATE
    config.HTMLExporter.extra_template_basedirs = [str(tmp_path / "templates")]
    test = v4.new_code_cell("assert True", metadata={"nbgrader": {"grade": True, "grade_id": "test_a", "points": 2,
                                                                   "solution": False, "locked": True}})
    page = nbgrader_page(v4.new_notebook(cells=[v4.new_markdown_cell("# 实验 01"), test]), tmp_path, config=config)
    assert '<html lang="zh-Hans">' in page and "得分：1.0 / 2.0" in page and ">测试单元格<" in page
    assert "Score:" not in page and "Test cell" not in page
