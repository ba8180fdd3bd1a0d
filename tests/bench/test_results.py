"""``--docs``: a benchmark's printed report becomes its docs page (tables kept as tables)."""

from __future__ import annotations

from bench.harness.results import as_markdown, page


def test_tables_stay_tables_and_other_lines_become_text_blocks() -> None:
    output = "measured:\n  figure 1.0 us\n| a | b |\n|---|---|\n| 1 | 2 |\nverdict: met\n"
    assert as_markdown(output) == (
        "```text\nmeasured:\n  figure 1.0 us\n```\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "```text\nverdict: met\n```\n"
    )


def test_the_page_names_the_command_commit_and_date() -> None:
    when = "2026-12-06 08:00 UTC"
    text = page("admit", "x\n", ["--rounds", "3"], commit="abc1234", when=when, load=0.5)
    assert text.startswith("<!-- Written by `python -m bench.admit --rounds 3 --docs`")
    assert "`python -m bench.admit --rounds 3` on `abc1234`, 2026-12-06 08:00 UTC" in text
    assert "load average 0.50 at the end" in text
    assert text.endswith("```text\nx\n```\n")
