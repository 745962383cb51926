"""The glossary (notebooks/glossary.md): each term it gives as the articles' is in the articles it cites, the terms
the articles do not use say so, and article 003's garbled words are decoded."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GLOSSARY = ROOT / "notebooks" / "glossary.md"
ARTICLES = ROOT.parent / "shared" / "seeds"  # the five articles, beside the course where it is developed
NOT_IN_THE_ARTICLES = ["state TTL", "two-phase commit", "timers", "ingestion time is not in the articles"]
DECODED = {"JPMP": "JVM heap", "out of course": "out-of-core", "even time": "event time", "Barry": "barrier",
           "XXY": "exactly-once"}


def _first_column() -> list[str]:
    terms = GLOSSARY.read_text(encoding="utf-8").split("## Article 003 decoded", 1)[0]
    return [line.split("|")[1].strip() for line in terms.splitlines()
            if line.startswith("| ") and not line.startswith("| in the articles")]


def _cited(cell: str) -> set[str]:
    found = set()
    for first, last in re.findall(r"\b(00\d)(?:–(00\d))?\b", cell):
        found.update(f"{n:03d}" for n in range(int(first), int(last or first) + 1))
    return found


def test_terms_the_articles_do_not_use_say_so_and_article_003_is_decoded():
    text = GLOSSARY.read_text(encoding="utf-8")
    rows = _first_column()
    for term in NOT_IN_THE_ARTICLES:
        assert any(term in row and "not in the articles" in row for row in rows), term
    for row in rows:
        assert _cited(row) or "not in the articles" in row or row.startswith("— (not in"), \
            f"the glossary's row {row!r} names no article"
    decoded = text.split("## Article 003 decoded", 1)[1]
    for garbled, meaning in DECODED.items():
        assert re.search(rf"\| [^|]*{re.escape(garbled)}[^|]* \| [^|]*{re.escape(meaning)}", decoded), garbled
    for gone in ("托管状态", "原始状态", "两阶段提交", "摄入时间", "定时器", "状态过期", "屏障", "键控状态"):
        assert gone not in "\n".join(rows), f"{gone} is not a word of the articles"


@pytest.mark.skipif(not ARTICLES.is_dir(), reason=f"the articles are not beside the course ({ARTICLES})")
def test_every_chinese_term_is_in_an_article_it_cites():
    articles = {p.name[:3]: p.read_text(encoding="utf-8") for p in ARTICLES.glob("00[0-4]_*.txt")}
    assert sorted(articles) == ["000", "001", "002", "003", "004"]
    for row in _first_column():
        cited = _cited(row)
        for term in re.findall(r"[\u4e00-\u9fff]{2,}", re.sub(r"\([^)]*\)", "", row)):
            assert any(term in articles[n] for n in cited), f"{term!r} ({row}) is in none of {sorted(cited)}"
        for term in re.findall(r"[A-Z][A-Za-z]+(?:State|Backend|Manager|Checkpoints)\b", row):
            assert any(term in articles[n] for n in cited), f"{term!r} ({row}) is in none of {sorted(cited)}"
